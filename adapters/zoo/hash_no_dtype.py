"""Arrays are hashed by shape and bytes, not dtype: int32 and float32 views of the same
bytes share an entry (HASH-3)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from reference.hasher import Hasher
from spec.adapter import Adapter
from spec.types import HashInput

BREAKS = "HASH-3"
KILLED_BY = "hash_array_dtype_and_shape"
ORIGIN = (
    "typical student error: hashing `array.tobytes()` with the shape, as the mini-build's "
    "sha256(image_bytes) does for bytes, forgetting that the dtype reinterprets them"
)


class NoDtypeHasher(Hasher):
    def hash_item(self, data: HashInput, options: Mapping[str, HashInput] | None = None) -> str:
        if isinstance(data, np.ndarray):
            array = np.ascontiguousarray(data)
            data = array.view(np.dtype((np.void, array.itemsize)))  # BUG: the dtype is lost
        return super().hash_item(data, options)


ADAPTER = Adapter(name="zoo.hash_no_dtype", hasher=NoDtypeHasher)

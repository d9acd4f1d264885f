"""Arrays are hashed flattened: dtype and bytes, but not shape (HASH-3)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from reference.hasher import Hasher
from spec.adapter import Adapter
from spec.types import HashInput

BREAKS = "HASH-3"
KILLED_BY = "hash_array_dtype_and_shape"
ORIGIN = (
    "typical student error: `hashlib.sha256(array.tobytes())`, which drops shape (numpy's "
    "tobytes is layout-free)"
)


class NoShapeHasher(Hasher):
    def hash_item(self, data: HashInput, options: Mapping[str, HashInput] | None = None) -> str:
        if isinstance(data, np.ndarray):
            data = np.ascontiguousarray(data).reshape(-1)  # BUG: the shape is lost
        return super().hash_item(data, options)


ADAPTER = Adapter(name="zoo.hash_no_shape", hasher=NoShapeHasher)

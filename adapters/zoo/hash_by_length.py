"""mm_hash is a function of the content's size only: equal-length images collide
(HASH-2)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from reference.hasher import Hasher
from spec.adapter import Adapter
from spec.types import HashInput

BREAKS = "HASH-2"
KILLED_BY = "hash_same_length_different_bytes"
ORIGIN = (
    "typical student error: a cache key built from the image's size (`len(image_bytes)`), "
    "which the seed 000 lesson 'same length, different bytes' exists to catch"
)


class LengthHasher(Hasher):
    def hash_item(self, data: HashInput, options: Mapping[str, HashInput] | None = None) -> str:
        if isinstance(data, np.ndarray):
            return super().hash_item(data.nbytes, options)  # BUG: size, not content
        if isinstance(data, (bytes, str, list, tuple, dict)):
            return super().hash_item(len(data), options)  # BUG: size, not content
        return super().hash_item(data, options)


ADAPTER = Adapter(name="zoo.hash_by_length", hasher=LengthHasher)

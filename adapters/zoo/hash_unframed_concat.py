"""Structures are serialized by concatenating keys and leaf bytes without lengths or
type tags, as vLLM v0.22.1's iter_item_to_bytes does (HASH-4)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from reference.hasher import Hasher
from spec.adapter import Adapter
from spec.types import HashInput


def unframed(data: object) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).tobytes()
    if isinstance(data, Mapping):
        return b"".join(str(k).encode() + unframed(v) for k, v in sorted(data.items()))
    if isinstance(data, (list, tuple)):
        return b"".join(unframed(v) for v in data)  # BUG: no lengths, no type tags
    return str(data).encode()


class UnframedHasher(Hasher):
    def hash_item(self, data: HashInput, options: Mapping[str, HashInput] | None = None) -> str:
        return super().hash_item(unframed(data), options)


BREAKS = "HASH-4"
KILLED_BY = "hash_structure_framed"
ORIGIN = (
    "vLLM v0.22.1 multimodal/hasher.py::MultiModalHasher.iter_item_to_bytes concatenates "
    "keys and values without lengths"
)
ADAPTER = Adapter(name="zoo.hash_unframed_concat", hasher=UnframedHasher)

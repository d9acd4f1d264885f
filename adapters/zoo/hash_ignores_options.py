"""mm_hash ignores the processor options: an image processed at another resolution
shares the entry (HASH-5)."""

from __future__ import annotations

from collections.abc import Mapping

from reference.hasher import Hasher
from spec.adapter import Adapter
from spec.types import HashInput

BREAKS = "HASH-5"
KILLED_BY = "hash_covers_processor_options"
ORIGIN = (
    "typical student error: hashing the pixels only, not the processor kwargs (vLLM's "
    "MultiModalHasher.hash_kwargs hashes both)"
)


class IgnoresOptions(Hasher):
    def hash_item(self, data: HashInput, options: Mapping[str, HashInput] | None = None) -> str:
        return super().hash_item(data)  # BUG: options dropped


ADAPTER = Adapter(name="zoo.hash_ignores_options", hasher=IgnoresOptions)

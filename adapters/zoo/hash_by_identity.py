"""mm_hash is derived from the object's identity (id()), not its content (HASH-1)."""

from __future__ import annotations

from collections.abc import Mapping

from reference.hasher import Hasher
from spec.adapter import Adapter
from spec.types import HashInput

BREAKS = "HASH-1"
KILLED_BY = "hash_equal_content_equal_hash"
ORIGIN = (
    "typical student error: keying the cache by `id(image)` (or `hash(obj)`), so equal "
    "content in another object misses"
)


class IdentityHasher(Hasher):
    def hash_item(self, data: HashInput, options: Mapping[str, HashInput] | None = None) -> str:
        return super().hash_item(id(data), options)  # BUG: identity, not content


ADAPTER = Adapter(name="zoo.hash_by_identity", hasher=IdentityHasher)

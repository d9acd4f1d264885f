"""A hit does not refresh its entry: the cache evicts in insertion order, and the image
every request reuses is the first to go (EMB-2)."""

from __future__ import annotations

from typing import Any

from numpy.typing import NDArray

from reference.embedding_cache import EmbeddingCache
from spec.adapter import Adapter

BREAKS = "EMB-2"
KILLED_BY = "EmbeddingCacheMachine"
ORIGIN = (
    "typical student error: an OrderedDict cache whose get reads the entry without "
    "move_to_end, so least recently used becomes first inserted (FIFO)"
)


class FifoCache(EmbeddingCache):
    def get(self, key: str) -> NDArray[Any] | None:
        entry = self._entries.get(key)  # BUG: no move_to_end: a use is not recorded
        return None if entry is None else entry.copy()


ADAPTER = Adapter(name="zoo.emb_get_keeps_order", embedding_cache=FifoCache)

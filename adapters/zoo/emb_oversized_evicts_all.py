"""An embedding larger than the whole cache evicts every entry before it is refused, as
SGLang 0.5.22's ``MultiModalStaticCache.set`` does (EMB-2)."""

from __future__ import annotations

from typing import Any

from numpy.typing import NDArray

from reference.embedding_cache import EmbeddingCache
from spec.adapter import Adapter

BREAKS = "EMB-2"
KILLED_BY = "EmbeddingCacheMachine"
ORIGIN = (
    "SGLang v0.5.22 `mem_cache/multimodal_cache.py::MultiModalStaticCache.set` (and 0.5.3's "
    "`MultiModalCache._allocate`): evicts least recently used entries until the embedding "
    "fits or the cache is empty, then refuses it; 0.5.23 refuses first"
)


class EvictsAllCache(EmbeddingCache):
    def put(self, key: str, embedding: NDArray[Any]) -> bool:
        if key not in self._entries and embedding.nbytes > self._capacity:
            while self._entries:  # BUG: emptied for an embedding that can never fit
                self._entries.popitem(last=False)
            self._used = 0
            return False
        return super().put(key, embedding)


ADAPTER = Adapter(name="zoo.emb_oversized_evicts_all", embedding_cache=EvictsAllCache)

"""A hit returns the embedding put last, not the one put under the key asked for: one
buffer reused for every entry (EMB-1)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from reference.embedding_cache import EmbeddingCache
from spec.adapter import Adapter

BREAKS = "EMB-1"
KILLED_BY = "EmbeddingCacheMachine"
ORIGIN = (
    "typical student error: caching a view of the encoder's one output buffer, which the "
    "next encode overwrites, so every entry reads the latest embedding"
)


class LastPutCache(EmbeddingCache):
    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._last: NDArray[Any] | None = None

    def put(self, key: str, embedding: NDArray[Any]) -> bool:
        admitted = super().put(key, embedding)
        if admitted:
            self._last = np.array(embedding, copy=True)
        return admitted

    def get(self, key: str) -> NDArray[Any] | None:
        if super().get(key) is None:
            return None
        return None if self._last is None else self._last.copy()  # BUG: the buffer's latest


ADAPTER = Adapter(name="zoo.emb_serves_last_put", embedding_cache=LastPutCache)

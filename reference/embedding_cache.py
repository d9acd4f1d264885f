"""A content-keyed embedding cache without references (EMB-1, EMB-2).

Entries are the encoder outputs of items (or of a request's items together) under their
identity, least recently used first. No request holds an entry: any entry may be evicted
whenever room is needed, and a later ``get`` misses and the engine encodes again — so the
only promises are that a hit is the entry's own embedding and that the budget holds:

- ``put`` copies the embedding (the caller's array may be reused or written later, and a
  slice of a larger output must not keep the whole alive) and charges its ``nbytes``;
- an embedding larger than the capacity is refused before anything is evicted: it could
  never be kept, and evicting for it would only empty the cache;
- a key already held is refreshed, not replaced: equal keys name equal content, so the
  entry is already the right one, and its charge stays what it was.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spec.errors import InvalidInputError


class EmbeddingCache:
    """``spec.components.EmbeddingCache`` over an ``OrderedDict`` (oldest use first)."""

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
            raise InvalidInputError(f"capacity must be an int >= 0, got {capacity!r}")
        self._capacity = capacity
        self._entries: OrderedDict[str, NDArray[Any]] = OrderedDict()
        self._used = 0

    def put(self, key: str, embedding: NDArray[Any]) -> bool:
        if not isinstance(embedding, np.ndarray):
            raise InvalidInputError(f"an embedding is an array, not {type(embedding).__name__}")
        if key in self._entries:
            self._entries.move_to_end(key)
            return True
        size = int(embedding.nbytes)
        if size > self._capacity:
            return False
        while self._used + size > self._capacity:
            _, evicted = self._entries.popitem(last=False)
            self._used -= int(evicted.nbytes)
        self._entries[key] = np.array(embedding, copy=True)
        self._used += size
        return True

    def get(self, key: str) -> NDArray[Any] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry.copy()

    def held(self) -> Mapping[str, int]:
        return MappingProxyType({key: int(entry.nbytes) for key, entry in self._entries.items()})

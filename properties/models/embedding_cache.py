"""The model of a content-keyed embedding cache (SPEC.md EMB-1, EMB-2) that
:mod:`properties.embedding_cache_machine` runs in lockstep with an implementation.

The LRU is fixed by EMB-2, so the model replays it: the keys held, oldest use first, each
with the embedding put under it and its charge (``nbytes``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from numpy.typing import NDArray


@dataclass
class EmbeddingCacheModel:
    capacity: int
    entries: OrderedDict[str, NDArray[Any]] = field(default_factory=OrderedDict)

    def used(self) -> int:
        return sum(int(entry.nbytes) for entry in self.entries.values())

    def held(self) -> list[tuple[str, int]]:
        return [(key, int(entry.nbytes)) for key, entry in self.entries.items()]

    def put(self, key: str, embedding: NDArray[Any]) -> tuple[bool, list[str]]:
        """Whether ``key`` is held afterwards, and the keys evicted for it."""
        if key in self.entries:
            self.entries.move_to_end(key)
            return True, []
        if embedding.nbytes > self.capacity:
            return False, []
        evicted = []
        while self.used() + embedding.nbytes > self.capacity:
            oldest, _ = self.entries.popitem(last=False)
            evicted.append(oldest)
        self.entries[key] = embedding.copy()
        return True, evicted

    def get(self, key: str) -> NDArray[Any] | None:
        if key not in self.entries:
            return None
        self.entries.move_to_end(key)
        return self.entries[key]

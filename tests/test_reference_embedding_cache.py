"""Unit tests of the reference embedding cache (SPEC.md EMB-1, EMB-2)."""

from __future__ import annotations

import numpy as np
import pytest

from reference.embedding_cache import EmbeddingCache
from spec.errors import InvalidInputError


def rows(count: int, value: float = 0.0) -> np.ndarray:
    """``count`` float32 rows of hidden size 2: 8 bytes a row."""
    return np.full((count, 2), value, dtype=np.float32)


def test_a_hit_is_the_entrys_own_embedding_and_a_copy() -> None:
    cache = EmbeddingCache(32)
    put = rows(2, 1.0)
    assert cache.put("a", put)
    put[:] = 9.0  # the caller reuses its buffer: the entry is the cache's own
    got = cache.get("a")
    assert got is not None and got.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert cache.get("b") is None


def test_eviction_is_least_recently_used_and_only_as_much_as_needed() -> None:
    cache = EmbeddingCache(32)
    for key in "abc":
        assert cache.put(key, rows(1))
    cache.get("a")  # a use: b is now the least recently used
    assert cache.put("d", rows(2))
    assert list(cache.held().items()) == [("c", 8), ("a", 8), ("d", 16)]


def test_an_embedding_larger_than_the_capacity_is_refused_and_evicts_nothing() -> None:
    cache = EmbeddingCache(16)
    assert cache.put("a", rows(1))
    assert not cache.put("huge", rows(3))
    assert dict(cache.held()) == {"a": 8}


def test_a_key_held_is_refreshed_not_replaced() -> None:
    cache = EmbeddingCache(24)
    assert cache.put("a", rows(1, 1.0)) and cache.put("b", rows(1))
    assert cache.put("a", rows(1, 1.0))
    assert list(cache.held().items()) == [("b", 8), ("a", 8)]
    assert cache.put("c", rows(1)) and cache.put("d", rows(1))  # evicts b only, then ...
    assert list(cache.held()) == ["a", "c", "d"]


@pytest.mark.parametrize("capacity", [-1, 1.5, True, "8"])
def test_a_bad_capacity_is_a_clear_error(capacity: object) -> None:
    with pytest.raises(InvalidInputError, match="capacity"):
        EmbeddingCache(capacity)  # type: ignore[arg-type]

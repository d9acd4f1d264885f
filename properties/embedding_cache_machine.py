"""EMB — a content-keyed embedding cache without references, as a state machine (SPEC.md
EMB-1, EMB-2).

Items' encoder outputs are put under their key and read back, in any order; keys recur
and each always names the same content (the cache is keyed by content, so a key that
comes back brings its embedding again). One key's embedding is larger than any capacity
drawn (an uncacheable video), others fit only after evictions. The model
(:class:`~properties.models.embedding_cache.EmbeddingCacheModel`) replays the LRU EMB-2
fixes; after every operation the keys held, their order and their charges must be the
model's, and every hit must be the entry's own embedding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule
from numpy.typing import NDArray

from properties.framework import (
    Parts,
    Runnable,
    TransitionRecorder,
    check,
    clause_property,
    machine,
    note,
)
from properties.models.embedding_cache import EmbeddingCacheModel
from spec.components import EmbeddingCache

EMB_CLAUSES = ("EMB-1", "EMB-2")

#: Rows of each key's embedding (hidden size 2, float32: 8 bytes a row). "E" weighs 72
#: bytes, more than any capacity drawn.
ROWS = {"A": 1, "B": 2, "C": 3, "D": 4, "E": 9}
HIDDEN = 2


def embedding_of(key: str) -> NDArray[Any]:
    """The key's content: rows numbered after the key, so two keys never look alike."""
    base = 100.0 * (ord(key) - ord("A") + 1)
    rows = ROWS[key]
    return (base + np.arange(rows * HIDDEN, dtype=np.float32)).reshape(rows, HIDDEN)


def _show(held: list[tuple[str, int]]) -> str:
    return "{" + ", ".join(f"{key}: {size} B" for key, size in held) + "}"


@clause_property("EmbeddingCacheMachine", EMB_CLAUSES, subject=("embedding_cache",))
def embedding_cache_machine(parts: Parts) -> Runnable:
    """EMB-1, EMB-2: the cache and the model in lockstep."""
    factory = parts.embedding_cache

    class EmbeddingCacheMachine(TransitionRecorder, RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.impl: EmbeddingCache | None = None
            self.model = EmbeddingCacheModel(0)

        @initialize(capacity=st.sampled_from([16, 24, 32, 40, 64]))
        def setup(self, capacity: int) -> None:
            self.impl = factory(capacity)
            self.model = EmbeddingCacheModel(capacity)
            note(f"an embedding cache of {capacity} bytes; embeddings weigh "
                 + ", ".join(f"{k} {embedding_of(k).nbytes} B" for k in ROWS))

        @property
        def cache(self) -> EmbeddingCache:
            assert self.impl is not None, "setup runs first"
            return self.impl

        def _check_held(self, after: str) -> None:
            held = list(self.cache.held().items())
            want = self.model.held()
            check(
                sum(size for _, size in held) <= self.model.capacity,
                "EMB-2",
                f"after {after} the cache holds {_show(held)}: "
                f"{sum(size for _, size in held)} bytes in a budget of {self.model.capacity}",
            )
            check(
                held == want,
                "EMB-2",
                f"after {after} the cache holds {_show(held)} (least recently used first); "
                f"a least-recently-used cache of {self.model.capacity} bytes holds "
                f"{_show(want)}",
            )

        @rule(key=st.sampled_from(sorted(ROWS)))
        def put(self, key: str) -> None:
            embedding = embedding_of(key)
            before = self.model.held()
            admitted, evicted = self.model.put(key, embedding)
            done = self.cache.put(key, embedding)
            note(f"put {key} ({embedding.nbytes} B) -> {done}")
            if not admitted:
                self.reached("refused")
            elif evicted:
                self.reached("evicting_put")
            check(
                done is admitted,
                "EMB-2",
                f"put {key} ({embedding.nbytes} B) into {_show(before)} with a budget of "
                f"{self.model.capacity} returned {done!r}; it "
                + ("fits after evicting " + (", ".join(evicted) or "nothing")
                   if admitted else "is larger than the budget and can never be held"),
            )
            self._check_held(f"put {key} into {_show(before)}")

        @rule(key=st.sampled_from(sorted(ROWS)))
        def get(self, key: str) -> None:
            want = self.model.get(key)
            got = self.cache.get(key)
            note(f"get {key} -> {'a miss' if got is None else 'a hit'}")
            if want is None:
                check(got is None, "EMB-1",
                      f"get {key} returned an embedding, but {key} is not held: a miss is due")
            else:
                self.reached("hit")
                check(got is not None, "EMB-1",
                      f"get {key} missed, but {key} is held ({_show(self.model.held())})")
                assert got is not None
                same = (isinstance(got, np.ndarray) and got.dtype == want.dtype
                        and got.shape == want.shape and np.array_equal(got, want))
                check(same, "EMB-1",
                      f"get {key} returned {np.asarray(got).tolist()}, not the embedding put "
                      f"under {key}: {want.tolist()}")
            self._check_held(f"get {key}")

    return machine(EmbeddingCacheMachine)

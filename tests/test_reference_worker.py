"""Unit tests of the reference worker store (reference/worker.py, SPEC.md WRK)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

import properties.worker  # noqa: F401 - registers the WRK properties
from reference.worker import WorkerStore
from spec import components
from spec.errors import InvalidInputError, InvalidRangeError, MissingEmbeddingError
from spec.types import GatherSpec, PlaceholderRange, WorkerStep

#: A Pixtral-style range: two image tokens then a break, twice (4 embeddings).
ROWBREAK = PlaceholderRange(10, 6, (True, True, False, True, True, False))
PLAIN = PlaceholderRange(0, 3)


def embeds(rows: int, base: float = 0.0) -> NDArray[Any]:
    return base + np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)


def gather(mm_hash: str, pos: PlaceholderRange, start: int, end: int) -> GatherSpec:
    return GatherSpec("req-1", mm_hash, pos, start, end)


# --- plain examples ----------------------------------------------------------------------


def test_meets_the_protocol_and_starts_empty() -> None:
    store = WorkerStore()
    assert isinstance(store, components.WorkerStore)
    assert store.held_hashes() == frozenset()
    assert store.execute_step(WorkerStep((), {}, ())) == []


def test_store_then_gather_selects_is_embed_rows() -> None:
    store = WorkerStore()
    out = embeds(4)
    rows = store.execute_step(
        WorkerStep(
            (),
            {"img": out},
            (
                gather("img", ROWBREAK, 0, 6),
                gather("img", ROWBREAK, 2, 4),  # a break, then one image token
                gather("img", ROWBREAK, 2, 3),  # the break alone takes no row
                gather("img", ROWBREAK, 4, 6),
            ),
        )
    )
    assert np.array_equal(rows[0], out)
    assert np.array_equal(rows[1], out[2:3])
    assert rows[2].shape == (0, 2)
    assert np.array_equal(rows[3], out[3:4])
    assert store.held_hashes() == {"img"}


def test_chunks_concatenate_to_the_whole_output() -> None:
    store = WorkerStore()
    out = embeds(4, base=100.0)
    store.execute_step(WorkerStep((), {"img": out}, ()))
    chunks = [
        store.execute_step(WorkerStep((), {}, (gather("img", ROWBREAK, s, e),)))[0]
        for s, e in [(0, 1), (1, 3), (3, 6)]
    ]
    assert np.array_equal(np.concatenate(chunks), out)


def test_free_before_store_in_one_step() -> None:
    store = WorkerStore()
    store.execute_step(WorkerStep((), {"a": embeds(3)}, ()))
    fresh = embeds(3, base=50.0)
    (rows,) = store.execute_step(
        WorkerStep(("a", "never-held"), {"a": fresh}, (gather("a", PLAIN, 0, 3),))
    )
    assert np.array_equal(rows, fresh)
    assert store.held_hashes() == {"a"}
    store.execute_step(WorkerStep(("a",), {}, ()))
    assert store.held_hashes() == frozenset()


def test_results_and_store_are_independent_of_caller_buffers() -> None:
    store = WorkerStore()
    out = embeds(3)
    (rows,) = store.execute_step(WorkerStep((), {"a": out}, (gather("a", PLAIN, 0, 3),)))
    out[...] = -1.0  # the caller reuses its encoder buffer
    rows[...] = -2.0  # and writes into the gathered rows
    (again,) = store.execute_step(WorkerStep((), {}, (gather("a", PLAIN, 0, 3),)))
    assert np.array_equal(again, embeds(3))


def test_a_miss_names_the_request_and_the_hash() -> None:
    store = WorkerStore()
    with pytest.raises(MissingEmbeddingError, match="req-1.*ghost"):
        store.execute_step(WorkerStep((), {}, (gather("ghost", PLAIN, 0, 1),)))


def test_row_count_mismatch_is_rejected() -> None:
    store = WorkerStore()
    with pytest.raises(InvalidInputError, match="5 rows.*takes 4"):
        store.execute_step(WorkerStep((), {"img": embeds(5)}, (gather("img", ROWBREAK, 0, 2),)))


def test_malformed_steps_are_rejected_without_changing_the_store() -> None:
    store = WorkerStore()
    store.execute_step(WorkerStep((), {"a": embeds(3)}, ()))
    with pytest.raises(InvalidInputError, match="bad"):
        store.execute_step(WorkerStep(("a",), {"bad": np.zeros(3, dtype=np.float32)}, ()))
    with pytest.raises(InvalidInputError, match="mm_hash"):
        store.execute_step(WorkerStep(("a",), {"": embeds(3)}, ()))
    with pytest.raises(InvalidInputError, match="bad"):
        store.execute_step(WorkerStep(("a",), {"bad": [[1.0]]}, ()))  # type: ignore[dict-item]
    assert store.held_hashes() == {"a"}
    with pytest.raises(InvalidRangeError):
        store.execute_step(WorkerStep((), {}, (gather("a", PLAIN, 2, 5),)))

"""Unit tests of the reference worker store (reference/worker.py, SPEC.md WRK), and the
WRK properties run against it and against their zoo entries."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import Phase, settings
from numpy.typing import NDArray

import properties.worker  # noqa: F401 - registers the WRK properties
from properties.framework import REGISTRY, ClauseViolation, Parts
from reference.prefix import BlockHasher
from reference.worker import WorkerStore
from spec import components
from spec.clauses import load_clauses
from spec.errors import InvalidInputError, InvalidRangeError, MissingEmbeddingError
from spec.types import GatherSpec, PlaceholderRange, WorkerStep

SETTINGS = settings(derandomize=True, database=None, max_examples=100, deadline=None)
# The explain phase only annotates an already shrunk counterexample and costs seconds.
ZOO_SETTINGS = settings(SETTINGS, phases=(Phase.explicit, Phase.generate, Phase.shrink))

WRK_PROPERTIES = sorted(name for name in REGISTRY if name.startswith("wrk_"))
ZOO = sorted(p.stem for p in Path(__file__).parents[1].glob("adapters/zoo/worker_*.py"))

#: A Pixtral-style range: two image tokens then a break, twice (4 embeddings).
ROWBREAK = PlaceholderRange(10, 6, (True, True, False, True, True, False))
PLAIN = PlaceholderRange(0, 3)


def _unused(component: str) -> Callable[..., Any]:
    def factory(*args: Any) -> Any:
        raise NotImplementedError(f"{component} is not used by the WRK properties")

    return factory


def parts(worker_store: Callable[[], components.WorkerStore] = WorkerStore) -> Parts:
    return Parts(
        processor=_unused("processor"),
        hasher=_unused("hasher"),
        encoder=_unused("encoder"),
        encoder_cache_manager=_unused("encoder_cache_manager"),
        splice=_unused("splice"),
        scheduling_hook=_unused("scheduling_hook"),
        block_hasher=BlockHasher,
        worker_store=worker_store,
        engine_loop=_unused("engine_loop"),
    )


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


# --- the properties against the reference and the zoo ----------------------------------


def test_every_wrk_clause_has_a_property() -> None:
    wrk = {c.id: c for c in load_clauses().values() if c.family == "WRK"}
    assert len(wrk) == 5
    for clause in wrk.values():
        assert clause.checked_by and all(name in REGISTRY for name in clause.checked_by)
    killers = {importlib.import_module(f"adapters.zoo.{name}").KILLED_BY for name in ZOO}
    assert killers == set(WRK_PROPERTIES), "every WRK property kills a zoo entry"


@pytest.mark.parametrize("name", WRK_PROPERTIES)
def test_reference_passes(name: str) -> None:
    runnable = REGISTRY[name].build(parts())
    runnable.run(SETTINGS)
    assert runnable.examples >= 100


@pytest.mark.parametrize("zoo_name", ZOO)
def test_zoo_entry_is_killed_by_its_property(zoo_name: str) -> None:
    module = importlib.import_module(f"adapters.zoo.{zoo_name}")
    assert module.__doc__ and "\n" not in module.__doc__.strip()
    assert module.BREAKS in load_clauses()
    spec = REGISTRY[module.KILLED_BY]
    assert module.BREAKS in spec.clauses
    adapter = module.ADAPTER
    assert adapter.name == f"zoo.{zoo_name}"
    assert adapter.worker_store is not None and adapter.block_hasher is None
    runnable = spec.build(parts(worker_store=adapter.worker_store))
    with pytest.raises(ClauseViolation) as caught:
        runnable.run(ZOO_SETTINGS)
    assert caught.value.clause == module.BREAKS

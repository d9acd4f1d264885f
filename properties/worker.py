"""Properties of the worker-side embedding store (SPEC.md WRK-1..5).

The store arrives through :class:`~properties.framework.Parts`. Each property drives it
with :class:`~spec.types.WorkerStep` programs and compares it with the simplest model:
a set of held hashes, and the embedding rows a window must receive, counted directly
from the ``is_embed`` mask (not through ``get_embeds_indices_in_range``).

Strategies aim where stores break: a hash freed and re-stored in the same step (the
scheduler evicts an entry and re-schedules the same image), frees of hashes the worker
never held, ``is_embed`` masks with row-break positions at the start, the end and in
runs, windows that select no row at all, and an item gathered chunk by chunk over
several steps.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import given, note
from hypothesis import strategies as st
from numpy.typing import NDArray

from properties.framework import (
    ClauseViolation,
    Parts,
    Runnable,
    check,
    clause_property,
    expect_error,
    keeps_own_cache,
    probed_product,
    stateless,
)
from spec.components import WorkerStore
from spec.errors import InvalidInputError, MissingEmbeddingError
from spec.types import GatherSpec, PlaceholderRange, WorkerStep

#: Hidden size of the embeddings the properties store.
HIDDEN = 3


@dataclass(frozen=True)
class Image:
    """One item the scheduler may have the worker store: its hash, its placeholder
    range, and the encoder output (every value distinct, so any misplaced row shows)."""

    mm_hash: str
    mm_position: PlaceholderRange
    embeds: NDArray[Any]

    def row_span(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        """The model's rows ``[a, b)`` for a window: one row per position that takes an
        embedding, counted from the mask."""
        mask = self.mm_position.is_embed or (True,) * self.mm_position.length
        first = sum(1 for flag in mask[:start_idx] if flag)
        return first, first + sum(1 for flag in mask[start_idx:end_idx] if flag)

    def rows_for(self, start_idx: int, end_idx: int) -> NDArray[Any]:
        first, end = self.row_span(start_idx, end_idx)
        return self.embeds[first:end]

    def gather(self, request_id: str, start_idx: int, end_idx: int) -> GatherSpec:
        return GatherSpec(request_id, self.mm_hash, self.mm_position, start_idx, end_idx)

    def describe(self) -> str:
        pos = self.mm_position
        mask = ""
        if pos.is_embed is not None:
            mask = ", is_embed=" + "".join("1" if b else "0" for b in pos.is_embed)
        return f"{self.mm_hash}: {pos.length} positions, {pos.get_num_embeds()} rows{mask}"


@st.composite
def _masks(draw: st.DrawFn, length: int) -> tuple[bool, ...] | None:
    """No mask; a Pixtral-style row-break pattern; or any mask with at least one
    embedding position (an item without embeddings is not an encoder input)."""
    kind = draw(st.sampled_from(["none", "rowbreak", "any"]))
    if kind == "none":
        return None
    if kind == "rowbreak":
        cols = draw(st.integers(1, 3))
        return tuple((i + 1) % (cols + 1) != 0 for i in range(length))
    mask = draw(st.lists(st.booleans(), min_size=length, max_size=length))
    mask[draw(st.integers(0, length - 1))] = True
    return tuple(mask)


@st.composite
def images(draw: st.DrawFn, min_count: int = 1, max_count: int = 3) -> list[Image]:
    """Distinct items with lengths 1..8 and distinct embedding values."""
    result: list[Image] = []
    offset = draw(st.integers(0, 3))
    for index in range(draw(st.integers(min_count, max_count))):
        length = draw(st.integers(1, 8))
        mm_position = PlaceholderRange(offset, length, draw(_masks(length)))
        rows = mm_position.get_num_embeds()
        base = 1000.0 * (index + 1)
        embeds = base + np.arange(rows * HIDDEN, dtype=np.float32).reshape(rows, HIDDEN)
        result.append(Image(f"img{index}", mm_position, embeds))
        offset += length + draw(st.integers(0, 2))
    return result


def _windows(image: Image) -> st.SearchStrategy[tuple[int, int]]:
    """Non-empty windows ``[start_idx, end_idx)`` of the item's positions."""
    length = image.mm_position.length
    return st.integers(0, length - 1).flatmap(
        lambda start: st.tuples(st.just(start), st.integers(start + 1, length))
    )


def _subset(
    data: st.DataObject, pool: Sequence[Image], label: str, min_size: int = 0
) -> list[Image]:
    """Distinct images of ``pool`` (none when it is empty)."""
    if not pool:
        return []
    return data.draw(
        st.lists(st.sampled_from(list(pool)), min_size=min_size, unique_by=lambda i: i.mm_hash),
        label=label,
    )


def _serve(store: WorkerStore, step: WorkerStep, clause: str, why: str) -> list[NDArray[Any]]:
    """Run a step whose gathers the store must serve: a miss is a violation of
    ``clause``, not an error of the implementation."""
    try:
        results = [np.asarray(rows) for rows in store.execute_step(step)]
    except MissingEmbeddingError as e:
        raise ClauseViolation(clause, f"{why}, but the worker missed: {e}") from e
    check(
        len(results) == len(step.gathers),
        clause,
        f"a step with {len(step.gathers)} gathers returned {len(results)} results",
    )
    return results


def _same_rows(got: NDArray[Any], want: NDArray[Any]) -> bool:
    return got.shape == want.shape and bool(np.array_equal(got, want))


def _directed_probe(parts: Parts) -> str | None:
    """Why WRK-1, WRK-2 and WRK-5 have nothing to judge in the adapter's worker store:
    it declares a cache of its own (``SelfManagedWorkerStore``); None for any other. A
    factory that raises, or gives no worker store, raises here (issue 32)."""
    store = probed_product(parts.worker_store(), WorkerStore, "worker_store")
    if keeps_own_cache(store):
        return (
            "the worker store keeps its own content-keyed cache (it declares "
            "self_managed(), spec/components.py::SelfManagedWorkerStore): no scheduler "
            "frees, held set or miss to judge; its gathers are judged (WRK-3, WRK-4)"
        )
    return None


@clause_property(
    "wrk_free_before_store",
    "WRK-1",
    subject=("worker_store",),
    capabilities=(("WRK-1", _directed_probe),),
)
def wrk_free_before_store(parts: Parts) -> Runnable:
    """WRK-1: steps in which some hashes are both freed and stored (and other freed
    hashes were never held); the re-stored ones are held and served in that step."""
    if _directed_probe(parts) is not None:
        return Runnable(run=lambda settings: None)

    @given(pool=images(), data=st.data())
    def test(pool: list[Image], data: st.DataObject) -> None:
        note("images: " + "; ".join(i.describe() for i in pool))
        store = parts.worker_store()
        for step_no in range(data.draw(st.integers(1, 3), label="steps")):
            stored = _subset(data, pool, "stored", min_size=1)
            both = data.draw(
                st.lists(st.sampled_from(stored), min_size=1, unique_by=lambda i: i.mm_hash),
                label="freed and stored",
            )
            freed = {i.mm_hash for i in both} | {i.mm_hash for i in _subset(data, pool, "freed")}
            note(
                f"step {step_no}: free {sorted(freed)}, store {[i.mm_hash for i in stored]}, "
                f"gather the whole of {[i.mm_hash for i in both]}"
            )
            step = WorkerStep(
                freed_mm_hashes=tuple(sorted(freed)),
                encoder_outputs={i.mm_hash: i.embeds for i in stored},
                gathers=tuple(i.gather(f"r{step_no}", 0, i.mm_position.length) for i in both),
            )
            results = _serve(
                store,
                step,
                "WRK-1",
                f"step {step_no} frees and re-stores {step.gathers[0].mm_hash}",
            )
            for image, rows in zip(both, results, strict=True):
                check(
                    _same_rows(rows, image.embeds),
                    "WRK-1",
                    f"{image.mm_hash} was freed and stored in step {step_no}; its gather "
                    f"returned {rows.shape[0]} rows that are not the stored output",
                )
            held = store.held_hashes()
            lost = sorted(i.mm_hash for i in both if i.mm_hash not in held)
            check(
                not lost,
                "WRK-1",
                f"{lost} were freed and stored in step {step_no} but are not held after it: "
                f"the frees were applied after the stores",
            )

    return stateless(test)


@clause_property(
    "wrk_freed_hash_dropped",
    "WRK-2",
    subject=("worker_store",),
    capabilities=(("WRK-2", _directed_probe),),
)
def wrk_freed_hash_dropped(parts: Parts) -> Runnable:
    """WRK-2: after every step of a program of frees and stores, the store holds
    exactly the model's set, and a gather of a dropped hash raises."""
    if _directed_probe(parts) is not None:
        return Runnable(run=lambda settings: None)

    @given(pool=images(), data=st.data())
    def test(pool: list[Image], data: st.DataObject) -> None:
        note("images: " + "; ".join(i.describe() for i in pool))
        store = parts.worker_store()
        model: set[str] = set()
        ever: set[str] = set()
        for step_no in range(data.draw(st.integers(1, 5), label="steps")):
            freed = [i.mm_hash for i in _subset(data, pool, "freed")]
            stored = _subset(data, pool, "stored")
            note(f"step {step_no}: free {freed}, store {[i.mm_hash for i in stored]}")
            store.execute_step(WorkerStep(tuple(freed), {i.mm_hash: i.embeds for i in stored}, ()))
            model.difference_update(freed)
            model.update(i.mm_hash for i in stored)
            ever.update(i.mm_hash for i in stored)
            held = set(store.held_hashes())
            check(
                held == model,
                "WRK-2",
                f"after step {step_no} the worker holds {sorted(held)}; stored and not freed "
                f"since: {sorted(model)}",
            )
            for image in pool:
                if image.mm_hash in ever and image.mm_hash not in model:
                    probe = WorkerStep(
                        (), {}, (image.gather("probe", 0, image.mm_position.length),)
                    )
                    expect_error(
                        "WRK-2",
                        MissingEmbeddingError,
                        functools.partial(store.execute_step, probe),
                        f"gathering {image.mm_hash} after it was freed (step {step_no})",
                    )

    return stateless(test)


@clause_property("wrk_gather_selects_embed_rows", "WRK-3", subject=("worker_store",))
def wrk_gather_selects_embed_rows(parts: Parts) -> Runnable:
    """WRK-3: arbitrary windows get exactly the rows of their embedding positions;
    writing into the results, or into the encoder outputs the store was given, changes
    nothing a later gather returns."""

    @given(pool=images(), data=st.data())
    def test(pool: list[Image], data: st.DataObject) -> None:
        note("images: " + "; ".join(i.describe() for i in pool))
        wanted = data.draw(
            st.lists(
                st.sampled_from(pool).flatmap(lambda i: st.tuples(st.just(i), _windows(i))),
                min_size=1,
                max_size=5,
            ),
            label="gathers",
        )
        gathers = tuple(image.gather("r", s, e) for image, (s, e) in wanted)
        store = parts.worker_store()

        def check_rows(results: list[NDArray[Any]], when: str) -> None:
            for (image, (s, e)), rows in zip(wanted, results, strict=True):
                a, b = image.row_span(s, e)
                check(
                    _same_rows(rows, image.embeds[a:b]),
                    "WRK-3",
                    f"positions [{s}, {e}) of {image.describe()} take rows [{a}, {b}) of "
                    f"its output, but the gather {when} returned {rows.shape[0]} rows that "
                    f"are not those",
                )

        outputs = {i.mm_hash: i.embeds.copy() for i in pool}
        first = _serve(store, WorkerStep((), outputs, gathers), "WRK-3", "all were stored")
        check_rows(first, "in the storing step")
        for rows in first:  # the caller owns its result and may write into it
            if rows.size and rows.flags.writeable:
                rows[...] = -1.0
        for output in outputs.values():  # and reuses the buffers it handed over
            output[...] = -2.0
        note("the caller writes -1 into every gathered row and -2 into the encoder outputs")
        again = _serve(store, WorkerStep((), {}, gathers), "WRK-3", "nothing was freed")
        check_rows(again, "after the caller wrote into earlier results and outputs")

    return stateless(test)


@clause_property("wrk_chunks_concatenate_to_whole", "WRK-4", subject=("worker_store",))
def wrk_chunks_concatenate_to_whole(parts: Parts) -> Runnable:
    """WRK-4: items stored once and gathered over consecutive windows in successive
    steps (a chunked prefill over one or two images) concatenate to the whole output."""

    @given(pool=images(max_count=2), data=st.data())
    def test(pool: list[Image], data: st.DataObject) -> None:
        note("images: " + "; ".join(i.describe() for i in pool))
        chunks: dict[str, list[tuple[int, int]]] = {}
        for image in pool:
            length = image.mm_position.length
            inner = range(1, length)
            cuts = data.draw(
                st.lists(st.sampled_from(inner), min_size=1 if length > 1 else 0, unique=True)
                if length > 1
                else st.just([]),
                label=f"cuts of {image.mm_hash}",
            )
            bounds = [0, *sorted(cuts), length]
            chunks[image.mm_hash] = list(zip(bounds, bounds[1:], strict=False))
            note(f"{image.mm_hash} is gathered in chunks {chunks[image.mm_hash]}")
        store = parts.worker_store()
        gathered: dict[str, list[NDArray[Any]]] = {i.mm_hash: [] for i in pool}
        num_steps = max(len(windows) for windows in chunks.values())
        for step_no in range(num_steps):
            due = [
                (image, chunks[image.mm_hash][step_no])
                for image in pool
                if step_no < len(chunks[image.mm_hash])
            ]
            outputs = {i.mm_hash: i.embeds for i in pool} if step_no == 0 else {}
            step = WorkerStep((), outputs, tuple(i.gather("r", s, e) for i, (s, e) in due))
            results = _serve(
                store, step, "WRK-4", f"step {step_no} gathers a chunk of images stored in step 0"
            )
            for (image, _), rows in zip(due, results, strict=True):
                gathered[image.mm_hash].append(rows)
        for image in pool:
            whole = np.concatenate(gathered[image.mm_hash], axis=0)
            check(
                _same_rows(whole, image.embeds),
                "WRK-4",
                f"the chunks of {image.describe()} concatenate to {whole.shape[0]} rows that "
                f"are not its {image.embeds.shape[0]}-row output, in order",
            )

    return stateless(test)


@clause_property(
    "wrk_miss_is_an_error",
    "WRK-5",
    subject=("worker_store",),
    capabilities=(("WRK-5", _directed_probe),),
)
def wrk_miss_is_an_error(parts: Parts) -> Runnable:
    """WRK-5: a gather of a hash never stored, or stored and freed, raises
    ``MissingEmbeddingError`` naming the hash; an output with the wrong row
    count for its range raises ``InvalidInputError``."""
    if _directed_probe(parts) is not None:
        return Runnable(run=lambda settings: None)

    @given(pool=images(min_count=2), data=st.data())
    def test(pool: list[Image], data: st.DataObject) -> None:
        note("images: " + "; ".join(i.describe() for i in pool))
        missing = data.draw(st.sampled_from(pool), label="missing image")
        others = [i for i in pool if i is not missing]
        freed_first = data.draw(st.booleans(), label="stored, then freed")
        store = parts.worker_store()
        if freed_first:
            note(f"{missing.mm_hash} is stored, then freed")
            store.execute_step(WorkerStep((), {missing.mm_hash: missing.embeds}, ()))
            store.execute_step(WorkerStep((missing.mm_hash,), {}, ()))
        stored = _subset(data, others, "stored")
        note(f"the worker holds {[i.mm_hash for i in stored]}")
        store.execute_step(WorkerStep((), {i.mm_hash: i.embeds for i in stored}, ()))
        start, end = data.draw(_windows(missing), label="window")
        if missing.row_span(start, end)[0] == missing.row_span(start, end)[1]:
            start, end = 0, missing.mm_position.length  # select at least one row
        request_id = data.draw(st.sampled_from(["req-7", "chat-42"]), label="request")
        probe = WorkerStep((), {}, (missing.gather(request_id, start, end),))
        error = expect_error(
            "WRK-5",
            MissingEmbeddingError,
            lambda: store.execute_step(probe),
            f"request {request_id} gathers positions [{start}, {end}) of {missing.mm_hash}, "
            f"which the worker does not hold",
        )
        check(
            missing.mm_hash in str(error),
            "WRK-5",
            f"the miss does not name hash {missing.mm_hash}: {error}",
        )
        # Not a held hash: a store may keep what it holds for a hash stored again (one
        # hash, one content; model runner V2's prepare_mm_inputs skips a held hash), so
        # the mis-sized output must be the one the store holds once the step is done.
        held = {i.mm_hash for i in stored}
        wrong = data.draw(
            st.sampled_from([i for i in pool if i.mm_hash not in held]), label="mis-sized image"
        )
        rows = wrong.embeds.shape[0]
        other_rows = data.draw(st.sampled_from([r for r in (0, rows - 1, rows + 1) if r >= 0]))
        note(f"the worker is given {other_rows} rows for {wrong.describe()}")
        bad = np.zeros((other_rows, HIDDEN), dtype=np.float32)
        mis_sized = WorkerStep(
            (), {wrong.mm_hash: bad}, (wrong.gather(request_id, 0, wrong.mm_position.length),)
        )
        expect_error(
            "WRK-5",
            InvalidInputError,
            lambda: store.execute_step(mis_sized),
            f"gathering {wrong.mm_hash} whose held output has {other_rows} rows for a range "
            f"of {rows} embeddings",
        )

    return stateless(test)

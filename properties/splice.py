"""SPL — the splice (SPEC.md SPL-1..5): ``inputs_embeds[is_multimodal] =
concat(mm_embeds)``.

Cases are built from placeholder ranges with ``is_embed`` masks (all-False-but-one,
single positions, adjacent items, an item at position 0), embeddings whose rows are all
distinct (so a permutation or a broadcast cannot go unnoticed, even after a cast to
float16), and dtypes that force a cast.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from hypothesis import given, note
from hypothesis import strategies as st
from numpy.typing import NDArray

from properties import oracles
from properties.framework import (
    Parts,
    Runnable,
    check,
    clause_property,
    expect_error,
    probed_product,
    stateless,
)
from properties.strategies import (
    PromptCase,
    describe_range,
    fixed_policies,
    is_embed_masks,
    prompt_cases,
)
from spec.components import InjectingSplice, Splice
from spec.errors import SpliceCountError
from spec.types import PlaceholderRange, ToyPolicy

#: Input dtypes of ``inputs_embeds`` and of the embeddings (a cast is often needed).
_DTYPES: tuple[type[np.floating[Any]], ...] = (np.float32, np.float16, np.float64)


@dataclass(frozen=True)
class SpliceCase:
    """Token embeddings, the image items' ranges, the selection mask and the rows."""

    inputs_embeds: NDArray[Any]
    ranges: tuple[PlaceholderRange, ...]
    is_multimodal: NDArray[Any]
    mm_embeds: tuple[NDArray[Any], ...]

    def describe(self) -> str:
        return (
            f"{self.inputs_embeds.shape[0]} positions x hidden {self.inputs_embeds.shape[1]} "
            f"({self.inputs_embeds.dtype}), items at "
            f"{[describe_range(r) for r in self.ranges]}, embeddings of "
            f"{[e.shape[0] for e in self.mm_embeds]} rows ({self._mm_dtypes()}), "
            f"selected positions {np.flatnonzero(self.is_multimodal).tolist()}"
        )

    def _mm_dtypes(self) -> str:
        return ", ".join(sorted({str(e.dtype) for e in self.mm_embeds})) or "none"


def selection_mask(num_positions: int, ranges: Sequence[PlaceholderRange]) -> NDArray[Any]:
    """``is_multimodal``: the range positions whose ``is_embed`` is true."""
    mask = np.zeros(num_positions, dtype=bool)
    for r in ranges:
        embeds = r.is_embed if r.is_embed is not None else (True,) * r.length
        for k, takes in enumerate(embeds):
            mask[r.offset + k] = takes
    return mask


def distinct_rows(rng: np.random.Generator, first_row: int, rows: int, hidden: int,
                  dtype: Any) -> NDArray[Any]:
    """Rows whose first column is ``1000 + global row index`` (exact even in float16),
    the rest noise: no two rows of a case are equal."""
    out = rng.standard_normal((rows, hidden)).astype(dtype)
    out[:, 0] = 1000 + np.arange(first_row, first_row + rows)
    return out


def draw_layout(draw: st.DrawFn, max_items: int) -> tuple[list[PlaceholderRange], int]:
    """Inside a composite strategy: up to ``max_items`` sorted, disjoint ranges with
    ``is_embed`` masks (often adjacent, often one position long), and how many positions
    the case has (a few text positions may follow the last range)."""
    ranges: list[PlaceholderRange] = []
    position = 0
    for _ in range(draw(st.integers(0, max_items))):
        position += draw(st.sampled_from([0]) | st.integers(0, 3))
        length = draw(st.sampled_from([1]) | st.integers(1, 5))
        ranges.append(PlaceholderRange(position, length, draw(is_embed_masks(length))))
        position += length
    return ranges, position + draw(st.integers(0, 3))


@st.composite
def splice_cases(draw: st.DrawFn, max_items: int = 3) -> SpliceCase:
    hidden = draw(st.integers(1, 8))
    in_dtype = draw(st.sampled_from(_DTYPES))
    mm_dtype = draw(st.sampled_from(_DTYPES))
    ranges, total = draw_layout(draw, max_items)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    inputs = rng.standard_normal((total, hidden)).astype(in_dtype)
    mm: list[NDArray[Any]] = []
    row = 0
    for r in ranges:
        mm.append(distinct_rows(rng, row, r.get_num_embeds(), hidden, mm_dtype))
        row += r.get_num_embeds()
    return SpliceCase(inputs, tuple(ranges), selection_mask(total, ranges), tuple(mm))


def _merge(parts: Parts, case: SpliceCase, clause: str) -> NDArray[Any]:
    note(f"splicing: {case.describe()}")
    out = parts.splice().merge(case.inputs_embeds.copy(), list(case.mm_embeds),
                               case.is_multimodal.copy())
    check(isinstance(out, np.ndarray) and out.shape == case.inputs_embeds.shape
          and out.dtype == case.inputs_embeds.dtype, clause,
          f"merge must return an array shaped and typed like inputs_embeds "
          f"{case.inputs_embeds.shape} {case.inputs_embeds.dtype}; got "
          f"{getattr(out, 'shape', None)} {getattr(out, 'dtype', type(out).__name__)}")
    return out


# --- SPL-1 -----------------------------------------------------------------------------


@clause_property("spl_text_rows_untouched", "SPL-1", subject=("splice",))
def spl_text_rows_untouched(parts: Parts) -> Runnable:
    """SPL-1: rows not selected by is_multimodal are bitwise the input's."""

    @given(case=splice_cases())
    def test(case: SpliceCase) -> None:
        out = _merge(parts, case, "SPL-1")
        text_rows = np.flatnonzero(~case.is_multimodal)
        changed = [int(p) for p in text_rows
                   if out[p].tobytes() != case.inputs_embeds[p].tobytes()]
        check(not changed, "SPL-1",
              f"rows {changed} are not selected by is_multimodal but differ from the input's")

    return stateless(test)


# --- SPL-2 -----------------------------------------------------------------------------


@clause_property("spl_rows_in_order", "SPL-2", subject=("splice",))
def spl_rows_in_order(parts: Parts) -> Runnable:
    """SPL-2: selected rows are the concatenated embeddings in order, cast to the input's
    dtype; positions is_embed leaves out keep their text rows."""

    @given(case=splice_cases())
    def test(case: SpliceCase) -> None:
        out = _merge(parts, case, "SPL-2")
        expected = oracles.expected_merge(case.inputs_embeds, case.mm_embeds, case.is_multimodal)
        selected = np.flatnonzero(case.is_multimodal)
        wrong = [int(p) for p in selected if out[p].tobytes() != expected[p].tobytes()]
        check(not wrong, "SPL-2",
              f"selected positions {wrong} do not hold the embedding rows in placeholder "
              f"order (cast to {case.inputs_embeds.dtype}); e.g. position {wrong[:1]} holds "
              f"{out[wrong[0]].tolist() if wrong else None}, expected "
              f"{expected[wrong[0]].tolist() if wrong else None}")
        skipped = [r.offset + k for r in case.ranges if r.is_embed is not None
                   for k, takes in enumerate(r.is_embed) if not takes]
        kept = all(out[p].tobytes() == case.inputs_embeds[p].tobytes() for p in skipped)
        check(kept, "SPL-2",
              f"positions {skipped} are left out by is_embed and must keep their text rows")

    return stateless(test)


# --- SPL-3 -----------------------------------------------------------------------------


@st.composite
def mismatched_cases(draw: st.DrawFn) -> tuple[SpliceCase, str]:
    """A consistent case spoiled so that rows != selected positions, with at least one
    embedding array: a row added to or removed from an item (possibly to 0 rows), an
    extra item, or a selected position added or removed."""
    case = draw(splice_cases())
    mm = list(case.mm_embeds)
    mask = case.is_multimodal.copy()
    hidden, dtype = case.inputs_embeds.shape[1], case.inputs_embeds.dtype
    kinds = ["extra_item", "add_row"]
    if mm:
        kinds += ["drop_row", "deselect", "select_more"]
    kind = draw(st.sampled_from(kinds))
    if kind == "extra_item" or (kind == "add_row" and not mm):
        mm.append(np.ones((draw(st.integers(1, 3)), hidden), dtype))
        why = "an extra embedding item"
    elif kind == "add_row":
        i = draw(st.integers(0, len(mm) - 1))
        mm[i] = np.concatenate([mm[i], np.full((1, hidden), 7, mm[i].dtype)])
        why = f"item {i} has one row too many"
    elif kind == "drop_row":
        i = draw(st.integers(0, len(mm) - 1))
        mm[i] = mm[i][:-1]
        why = f"item {i} has one row too few ({mm[i].shape[0]})"
    elif kind == "deselect":
        selected = np.flatnonzero(mask)
        mask[draw(st.sampled_from(selected.tolist()))] = False
        why = "one selected position fewer"
    else:
        free = np.flatnonzero(~mask)
        if free.size:
            mask[draw(st.sampled_from(free.tolist()))] = True
            why = "one more selected position"
        else:
            mm.append(np.ones((1, hidden), dtype))
            why = "an extra one-row item"
    spoiled = SpliceCase(case.inputs_embeds, case.ranges, mask, tuple(mm))
    assert sum(e.shape[0] for e in mm) != int(mask.sum())
    return spoiled, why


@clause_property("spl_count_mismatch_message", "SPL-3", subject=("splice",))
def spl_count_mismatch_message(parts: Parts) -> Runnable:
    """SPL-3: a count mismatch raises SpliceCountError with the upstream message."""

    @given(bad=mismatched_cases())
    def test(bad: tuple[SpliceCase, str]) -> None:
        case, why = bad
        note(f"count mismatch ({why}): {case.describe()}")
        splice = parts.splice()
        error = expect_error(
            "SPL-3",
            SpliceCountError,
            lambda: splice.merge(case.inputs_embeds.copy(), list(case.mm_embeds),
                                 case.is_multimodal.copy()),
            f"merging {sum(e.shape[0] for e in case.mm_embeds)} rows into "
            f"{int(case.is_multimodal.sum())} placeholders",
        )
        expected = oracles.splice_count_message(case.mm_embeds, int(case.is_multimodal.sum()))
        check(str(error) == expected, "SPL-3",
              f"the error message is {str(error)!r}; expected {expected!r}")

    return stateless(test)


# --- SPL-4 -----------------------------------------------------------------------------


@st.composite
def _broadcast_bait(draw: st.DrawFn) -> tuple[NDArray[Any], list[NDArray[Any]], NDArray[Any],
                                              str]:
    """A single row against two or more placeholders, or no embeddings at all against
    one or more."""
    hidden = draw(st.integers(1, 8))
    total = draw(st.integers(2, 10))
    kind = draw(st.sampled_from(["single_row", "empty_list"]))
    low = 2 if kind == "single_row" else 1
    num_selected = draw(st.integers(low, total))
    positions = draw(st.permutations(range(total)))[:num_selected]
    mask = np.zeros(total, dtype=bool)
    mask[list(positions)] = True
    inputs = np.arange(total * hidden, dtype=np.float32).reshape(total, hidden)
    if kind == "single_row":
        return inputs, [np.full((1, hidden), 9, np.float32)], mask, (
            f"a single embedding row for {num_selected} placeholders")
    return inputs, [], mask, f"an empty embedding list for {num_selected} placeholders"


@clause_property("spl_no_broadcast", "SPL-4", subject=("splice",))
def spl_no_broadcast(parts: Parts) -> Runnable:
    """SPL-4: one row is never broadcast over several placeholders; an empty list with
    selected positions is an error."""

    @given(bait=_broadcast_bait())
    def test(bait: tuple[NDArray[Any], list[NDArray[Any]], NDArray[Any], str]) -> None:
        inputs, mm, mask, why = bait
        note(f"{why}: selected positions {np.flatnonzero(mask).tolist()} of {len(mask)}")
        splice = parts.splice()
        expect_error("SPL-4", SpliceCountError,
                     lambda: splice.merge(inputs.copy(), mm, mask.copy()),
                     f"merging {why}")

    return stateless(test)


# --- SPL-5 -----------------------------------------------------------------------------


def text_embeddings(token_ids: Sequence[int], hidden: int) -> NDArray[Any]:
    """A fixed, deterministic text embedding table: row = f(token id), different for
    every id (the properties' stand-in for the LLM's embedding layer)."""
    ids = np.asarray(list(token_ids), dtype=np.int64).reshape(-1, 1)
    cols = np.arange(hidden, dtype=np.int64).reshape(1, -1)
    table = (ids * 7919 + cols * 104729) % 1009
    out = (table.astype(np.float32) / 8).reshape(len(token_ids), hidden)
    if hidden:
        out[:, 0] = ids[:, 0].astype(np.float32)  # the id itself: distinct rows
    return out


def _injection_cases() -> st.SearchStrategy[PromptCase]:
    # Policies without is_embed masks: injection replaces a marker by one row per
    # placeholder position, which is what the splice fills when every position embeds.
    return prompt_cases(policies=st.just(ToyPolicy()) | fixed_policies(6), max_images=3)


def injection_probe(clause: str) -> Callable[[Parts], str | None]:
    """Why the adapter's splice lacks the optional ``inject`` (None: it has it); a
    factory that raises, or gives no splice, raises here (issue 32)."""

    def probe(parts: Parts) -> str | None:
        splice = probed_product(parts.splice(), Splice, "splice")
        if callable(getattr(splice, "inject", None)):
            return None
        return (
            f"the splice does not provide the optional inject() ({clause}): no "
            "marker-injection path"
        )

    return probe


@clause_property(
    "spl_injection_commutes",
    "SPL-5",
    subject=("splice",),
    uses=("processor",),
    capabilities=(("SPL-5", injection_probe("SPL-5")),),
)
def spl_injection_commutes(parts: Parts) -> Runnable:
    """SPL-5: injecting image rows at the markers equals expanding, then splicing."""
    if injection_probe("SPL-5")(parts) is not None:
        return Runnable(run=lambda settings: None)

    @given(case=_injection_cases(), hidden=st.integers(1, 8), seed=st.integers(0, 2**32 - 1))
    def test(case: PromptCase, hidden: int, seed: int) -> None:
        note(f"prompt case: {case.describe()}")
        expanded = parts.processor(case.config).expand(list(case.prompt), list(case.images))
        rng = np.random.default_rng(seed)
        visual: list[NDArray[Any]] = []
        row = 0
        for r in expanded.ranges:
            visual.append(distinct_rows(rng, row, r.get_num_embeds(), hidden, np.float32))
            row += r.get_num_embeds()
        note(f"image rows per marker: {[v.shape[0] for v in visual]}")
        splice = parts.splice()
        injected = cast(InjectingSplice, splice).inject(
            list(case.prompt), text_embeddings(case.prompt, hidden), visual,
            case.config.marker_id,
        )
        mask = selection_mask(len(expanded.token_ids), expanded.ranges)
        spliced = splice.merge(text_embeddings(expanded.token_ids, hidden), visual, mask)
        check(injected.shape == spliced.shape, "SPL-5",
              f"injection gave {injected.shape}, expand-then-splice {spliced.shape}")
        differ = [int(p) for p in range(spliced.shape[0])
                  if injected[p].tobytes() != spliced[p].tobytes()]
        check(not differ, "SPL-5",
              f"injection and expand-then-splice disagree at positions {differ}")

    return stateless(test)

"""DIFF — differential properties (SPEC.md DIFF-1..4): an implementation against a
numpy oracle, in every precision it computes in.

The oracle lives here, written from the clauses (never from ``reference/``, which is
under test too). numpy has no bfloat16: bfloat16 arrays cross the boundary as their
``uint16`` bit patterns and the oracle rounds to bfloat16 on the bits, to nearest-even.
Every comparison is of bit patterns, so NaN payloads and signed zeros count.

Precisions beyond the Protocols are optional extensions, found by duck typing
(:class:`spec.components.Bfloat16Splice`, :class:`spec.components.MultiPrecisionEncoder`;
the torch adapter has both).
float32 and float16 are always checked through ``Splice.merge``/``inject``, float32
through ``Encoder.encode_batch``: a plain implementation is held to the same oracle in
the precisions it has, and nothing here needs torch.

Strategies aim at the last bit: values exactly half-way between two neighbours of the
target precision and one source ulp either side (where a double rounding, a truncating
cast or a detour through a narrower type shows), values around the target's largest
finite value (overflow to infinity), subnormals, and text rows with arbitrary bit
patterns — NaN payloads included, which a splice that converts text rows destroys.

Over 400 lines (613) because the DIFF family (DIFF-1..4) with its dtype extension and
the oracle comparisons, read beside SPEC.md's DIFF section.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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
    stateless,
)
from properties.splice import draw_layout, injection_probe, selection_mask
from properties.strategies import describe_image, images
from spec.components import (
    Bfloat16Splice,
    Encoder,
    InjectingSplice,
    MultiPrecisionEncoder,
    Splice,
)
from spec.errors import MarkerCountError, SpliceCountError
from spec.types import ImageInput, PlaceholderRange

# --- the oracle -------------------------------------------------------------------------

#: Bit-pattern dtype and numpy dtype (None: bfloat16, which numpy lacks) per precision.
_BITS: dict[str, type[np.unsignedinteger[Any]]] = {
    "float32": np.uint32,
    "float16": np.uint16,
    "bfloat16": np.uint16,
}
_NUMPY: dict[str, type[np.floating[Any]] | None] = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": None,
}
#: Machine epsilon per precision (DIFF-4's accelerator tolerance is 8 of them).
EPSILON: dict[str, float] = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}
_BFLOAT16_NAN = np.uint16(0x7FC0)


def _round_to_odd_float32(values: NDArray[np.float64]) -> NDArray[np.float32]:
    """float64 -> float32 rounding to odd (truncate, then set the last bit when
    inexact): the intermediate that makes a following rounding to a precision at
    least two bits narrower exact (Boldo & Melquiond 2008)."""
    with np.errstate(over="ignore"):
        nearest = values.astype(np.float32)
    overshoot = np.abs(nearest.astype(np.float64)) > np.abs(values)
    toward_zero = np.where(overshoot, np.nextafter(nearest, np.float32(0)), nearest)
    inexact = toward_zero.astype(np.float64) != values
    bits = toward_zero.astype(np.float32).view(np.uint32)
    odd: NDArray[np.uint32] = np.where(inexact, bits | np.uint32(1), bits).astype(np.uint32)
    return odd.view(np.float32)


def bfloat16_bits(values: NDArray[Any]) -> NDArray[np.uint16]:
    """The bfloat16 bit patterns of float values, each rounded once to nearest-even
    (NaN becomes the quiet NaN ``0x7FC0``, as torch writes it)."""
    if values.dtype == np.float64:
        wide = _round_to_odd_float32(values)
    else:
        wide = values.astype(np.float32)  # float16 and float32 widen exactly
    u = wide.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    rounded[np.isnan(wide)] = _BFLOAT16_NAN
    return rounded


def _numpy_type(precision: str) -> type[np.floating[Any]]:
    numpy_type = _NUMPY[precision]
    assert numpy_type is not None, f"{precision} has no numpy dtype"
    return numpy_type


def rounded_bits(values: NDArray[Any], precision: str) -> NDArray[Any]:
    """Float values rounded once, to nearest-even, into ``precision``, as bit patterns."""
    if precision == "bfloat16":
        return bfloat16_bits(values)
    with np.errstate(over="ignore"):  # overflow to infinity is the expected result
        return values.astype(_numpy_type(precision)).view(_BITS[precision])


def expected_merge_bits(
    text_bits: NDArray[Any],
    mm_embeds: Sequence[NDArray[Any]],
    is_multimodal: NDArray[np.bool_],
    precision: str,
) -> NDArray[Any]:
    """DIFF-1: text rows keep their bits; selected rows, in order, take the rows of
    the embeddings rounded into ``precision``."""
    out = text_bits.copy()
    if mm_embeds:
        rows = np.concatenate([rounded_bits(e, precision) for e in mm_embeds])
        out[is_multimodal] = rows
    return out


def expected_inject_bits(
    input_ids: Sequence[int],
    text_bits: NDArray[Any],
    visual_tokens: Sequence[NDArray[Any]],
    marker_id: int,
    precision: str,
) -> NDArray[Any]:
    """DIFF-2: each marker row replaced by its image's rows rounded into ``precision``."""
    pieces: list[NDArray[Any]] = []
    images_left = iter(visual_tokens)
    for position, token in enumerate(input_ids):
        if token == marker_id:
            pieces.append(rounded_bits(next(images_left), precision))
        else:
            pieces.append(text_bits[position : position + 1])
    if not pieces:
        return text_bits.copy()
    return np.concatenate(pieces)


# --- running an implementation in a precision -------------------------------------------


@contextmanager
def _quiet_casts() -> Iterator[None]:
    """Overflow to infinity in a cast is the expected result here, not a warning."""
    with np.errstate(over="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def splice_precisions(splice: Splice) -> tuple[str, ...]:
    """float32 and float16 always; bfloat16 when the splice offers it."""
    if isinstance(splice, Bfloat16Splice):
        return ("float32", "float16", "bfloat16")
    return ("float32", "float16")


def _as_bits(out: object, precision: str, shape: tuple[int, ...], clause: str) -> NDArray[Any]:
    """The implementation's result as bit patterns, after checking its type."""
    want = "uint16 bit patterns" if precision == "bfloat16" else precision
    dtype = _BITS[precision] if precision == "bfloat16" else _NUMPY[precision]
    ok = isinstance(out, np.ndarray) and out.dtype == dtype and out.shape == shape
    check(
        ok,
        clause,
        f"in {precision} the result must be an array of {want} shaped {shape}; got "
        f"{getattr(out, 'dtype', type(out).__name__)} {getattr(out, 'shape', '')}",
    )
    assert isinstance(out, np.ndarray)
    return out.view(_BITS[precision])


def run_merge(
    splice: Splice,
    precision: str,
    text_bits: NDArray[Any],
    mm_embeds: Sequence[NDArray[Any]],
    mask: NDArray[np.bool_],
) -> object:
    """``merge`` (or ``merge_bfloat16``) on copies of the inputs, result as returned."""
    mm = [e.copy() for e in mm_embeds]
    with _quiet_casts():
        if precision == "bfloat16":
            assert isinstance(splice, Bfloat16Splice)
            return splice.merge_bfloat16(text_bits.copy(), mm, mask.copy())
        return splice.merge(text_bits.copy().view(_numpy_type(precision)), mm, mask.copy())


def run_inject(
    splice: Splice,
    precision: str,
    input_ids: Sequence[int],
    text_bits: NDArray[Any],
    visual: Sequence[NDArray[Any]],
    marker_id: int,
) -> object:
    images_ = [v.copy() for v in visual]
    with _quiet_casts():
        if precision == "bfloat16":
            assert isinstance(splice, Bfloat16Splice)
            return splice.inject_bfloat16(list(input_ids), text_bits.copy(), images_, marker_id)
        text = text_bits.copy().view(_numpy_type(precision))
        return cast(InjectingSplice, splice).inject(list(input_ids), text, images_, marker_id)


# --- values aimed at the last bit -------------------------------------------------------

_SOURCES: tuple[type[np.floating[Any]], ...] = (np.float64, np.float32, np.float16)


def _target_neighbours(rng: np.random.Generator, precision: str) -> tuple[float, float] | None:
    """Two adjacent finite values of ``precision`` (as float64), or None."""
    bits = int(rng.integers(0, 2 ** (8 * np.dtype(_BITS[precision]).itemsize)))
    if precision == "bfloat16":
        low = float(np.array([bits << 16], np.uint32).view(np.float32)[0])
        high_bits = (bits + 1) % 2**16
        high = float(np.array([high_bits << 16], np.uint32).view(np.float32)[0])
    else:
        numpy_type = _NUMPY[precision]
        assert numpy_type is not None
        unsigned = _BITS[precision]
        low = float(np.array([bits], unsigned).view(numpy_type)[0])
        high_bits = (bits + 1) % 2 ** (8 * np.dtype(unsigned).itemsize)
        high = float(np.array([high_bits], unsigned).view(numpy_type)[0])
    if not (np.isfinite(low) and np.isfinite(high)) or (low < 0) != (high < 0):
        return None
    return low, high


def _aimed_value(rng: np.random.Generator, source: type[np.floating[Any]], precision: str) -> Any:
    """One source value: a half-way point of the target or a source ulp off it, a value
    near the target's overflow threshold, a subnormal, random bits, or plain noise."""
    kind = rng.integers(0, 10)
    if kind < 4:
        pair = _target_neighbours(rng, precision)
        if pair is not None:
            midpoint = np.float64((pair[0] + pair[1]) / 2)  # exact: few significant bits
            with np.errstate(over="ignore"):
                value = source(midpoint)
            if np.isfinite(value) and np.float64(value) == midpoint:
                step = int(rng.integers(-1, 2))
                if step:
                    value = np.nextafter(value, source(np.inf * step))
                return value
    if kind == 4:
        largest = {"float32": 3.4028234663852886e38, "float16": 65504.0,
                   "bfloat16": 3.3895313892515355e38}[precision]
        value = source(min(largest * rng.uniform(0.99, 1.01), float(np.finfo(source).max)))
        return -value if rng.integers(0, 2) else value
    if kind == 5:
        tiny = float(np.finfo(source).smallest_subnormal)
        return source(tiny * int(rng.integers(1, 64)))
    if kind == 6:
        width = np.dtype(source).itemsize * 8
        unsigned = {16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
        raw = np.array([rng.integers(0, 2**width, dtype=np.uint64)], np.uint64).astype(unsigned)
        value = raw.view(source)[0]
        return value if np.isfinite(value) else source(0.0)
    return source(rng.standard_normal() * 10.0 ** rng.uniform(-3, 3))


def aimed_embeddings(
    rng: np.random.Generator, rows: int, hidden: int, source: type[np.floating[Any]],
    precision: str,
) -> NDArray[Any]:
    values = [_aimed_value(rng, source, precision) for _ in range(rows * hidden)]
    return np.array(values, dtype=source).reshape(rows, hidden)


def text_bit_patterns(
    rng: np.random.Generator, rows: int, hidden: int, precision: str
) -> NDArray[Any]:
    """Token embeddings as arbitrary bit patterns of the precision: NaN payloads,
    infinities, signed zeros and subnormals included."""
    unsigned = _BITS[precision]
    width = 8 * np.dtype(unsigned).itemsize
    raw = rng.integers(0, 2**width, size=(rows, hidden), dtype=np.uint64)
    return raw.astype(unsigned)


# --- cases ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffCase:
    """A splice case in one precision: text rows as bit patterns, the items' ranges,
    the selection mask, and the embeddings in their source dtype."""

    precision: str
    text_bits: NDArray[Any]
    ranges: tuple[PlaceholderRange, ...]
    mask: NDArray[np.bool_]
    mm_embeds: tuple[NDArray[Any], ...]

    def describe(self) -> str:
        sources = ", ".join(sorted({str(e.dtype) for e in self.mm_embeds})) or "none"
        return (
            f"{self.precision}: {self.text_bits.shape[0]} positions x hidden "
            f"{self.text_bits.shape[1]}, items at "
            f"{[(r.offset, r.length) for r in self.ranges]}, embeddings of "
            f"{[e.shape[0] for e in self.mm_embeds]} rows ({sources}), selected positions "
            f"{np.flatnonzero(self.mask).tolist()}"
        )


@st.composite
def diff_cases(draw: st.DrawFn, precisions: tuple[str, ...], max_items: int = 3) -> DiffCase:
    precision = draw(st.sampled_from(precisions))
    hidden = draw(st.integers(1, 6))
    ranges, total = draw_layout(draw, max_items)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="value seed"))
    mm = tuple(
        aimed_embeddings(rng, r.get_num_embeds(), hidden, draw(st.sampled_from(_SOURCES)),
                         precision)
        for r in ranges
    )
    text = text_bit_patterns(rng, total, hidden, precision)
    return DiffCase(precision, text, tuple(ranges), selection_mask(total, ranges), mm)


def _first_differences(got: NDArray[Any], want: NDArray[Any], limit: int = 3) -> str:
    rows, cols = np.nonzero(got != want)
    shown = [
        f"[{r}, {c}] is 0x{int(got[r, c]):x}, expected 0x{int(want[r, c]):x}"
        for r, c in list(zip(rows.tolist(), cols.tolist(), strict=True))[:limit]
    ]
    return f"{len(rows)} elements differ in their bits: " + "; ".join(shown)


def _source_of(case: DiffCase, position: int, column: int) -> str:
    """Which embedding value a selected position came from (for the narration)."""
    selected = np.flatnonzero(case.mask).tolist()
    if position not in selected:
        return "a text row"
    row = selected.index(position)
    for index, embeds in enumerate(case.mm_embeds):
        if row < embeds.shape[0]:
            value = embeds[row, column]
            return f"item {index} row {row}: {value!r} ({embeds.dtype})"
        row -= embeds.shape[0]
    return "?"


# --- DIFF-1 -----------------------------------------------------------------------------


@clause_property("diff_splice_matches_oracle", "DIFF-1", subject=("splice",))
def diff_splice_matches_oracle(parts: Parts) -> Runnable:
    precisions = splice_precisions(parts.splice())

    @given(case=diff_cases(precisions))
    def test(case: DiffCase) -> None:
        note(f"splicing in {case.describe()}")
        out = run_merge(parts.splice(), case.precision, case.text_bits, case.mm_embeds, case.mask)
        got = _as_bits(out, case.precision, case.text_bits.shape, "DIFF-1")
        want = expected_merge_bits(case.text_bits, case.mm_embeds, case.mask, case.precision)
        if not np.array_equal(got, want):
            r, c = (int(i[0]) for i in np.nonzero(got != want))
            note(f"the first differing element comes from {_source_of(case, r, c)}")
        check(np.array_equal(got, want), "DIFF-1",
              f"merge in {case.precision} differs from the oracle: "
              f"{_first_differences(got, want)}")

    return stateless(test)


# --- DIFF-2 -----------------------------------------------------------------------------


@dataclass(frozen=True)
class InjectCase:
    precision: str
    input_ids: tuple[int, ...]
    text_bits: NDArray[Any]
    visual: tuple[NDArray[Any], ...]
    marker_id: int

    def describe(self) -> str:
        sources = ", ".join(sorted({str(v.dtype) for v in self.visual})) or "none"
        return (
            f"{self.precision}: input_ids {list(self.input_ids)} (marker {self.marker_id}), "
            f"hidden {self.text_bits.shape[1]}, images of "
            f"{[v.shape[0] for v in self.visual]} rows ({sources})"
        )


_MARKER = 32000


@st.composite
def inject_cases(draw: st.DrawFn, precisions: tuple[str, ...]) -> InjectCase:
    """Prompts with 0-3 markers (at the start, the end, adjacent), one image each —
    or, sometimes, one image too many or too few."""
    precision = draw(st.sampled_from(precisions))
    hidden = draw(st.integers(1, 6))
    tokens = draw(
        st.lists(st.sampled_from([_MARKER]) | st.integers(0, 31999), max_size=8)
    )
    num_images = tokens.count(_MARKER)
    if draw(st.integers(0, 9)) == 0:
        num_images = max(0, num_images + draw(st.sampled_from([-1, 1])))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="value seed"))
    visual = tuple(
        aimed_embeddings(rng, draw(st.integers(1, 4)), hidden, draw(st.sampled_from(_SOURCES)),
                         precision)
        for _ in range(num_images)
    )
    text = text_bit_patterns(rng, len(tokens), hidden, precision)
    return InjectCase(precision, tuple(tokens), text, visual, _MARKER)


@clause_property(
    "diff_injection_matches_oracle",
    "DIFF-2",
    subject=("splice",),
    capabilities=(("DIFF-2", injection_probe("DIFF-2")),),
)
def diff_injection_matches_oracle(parts: Parts) -> Runnable:
    if injection_probe("DIFF-2")(parts) is not None:
        return Runnable(run=lambda settings: None)
    precisions = splice_precisions(parts.splice())

    @given(case=inject_cases(precisions))
    def test(case: InjectCase) -> None:
        note(f"injecting in {case.describe()}")
        splice = parts.splice()

        def run() -> object:
            return run_inject(splice, case.precision, case.input_ids, case.text_bits,
                              case.visual, case.marker_id)

        markers = case.input_ids.count(case.marker_id)
        if markers != len(case.visual):
            expect_error("DIFF-2", MarkerCountError, run,
                         f"injecting {len(case.visual)} images at {markers} markers")
            return
        want = expected_inject_bits(case.input_ids, case.text_bits, case.visual,
                                    case.marker_id, case.precision)
        got = _as_bits(run(), case.precision, want.shape, "DIFF-2")
        check(np.array_equal(got, want), "DIFF-2",
              f"inject in {case.precision} differs from the oracle: "
              f"{_first_differences(got, want)}")

    return stateless(test)


# --- DIFF-3 -----------------------------------------------------------------------------


@st.composite
def mismatched_diff_cases(draw: st.DrawFn, precisions: tuple[str, ...]) -> tuple[DiffCase, str]:
    """A case whose rows and selected positions differ in number, at least one
    embedding array: a single row against several placeholders (the broadcast bait),
    a row more or less in one item, or an extra item."""
    case = draw(diff_cases(precisions))
    hidden = case.text_bits.shape[1]
    mm = list(case.mm_embeds)
    mask = case.mask.copy()
    kind = draw(st.sampled_from(["single_row", "extra_item", "add_row", "drop_row"]))
    if kind == "single_row" and mask.sum() >= 2:
        mm = [mm[0][:1] if mm else np.ones((1, hidden), np.float32)]
        why = f"a single row for {int(mask.sum())} placeholders"
    elif kind in ("add_row", "drop_row") and mm:
        index = draw(st.integers(0, len(mm) - 1))
        if kind == "add_row":
            mm[index] = np.concatenate([mm[index], mm[index][-1:]])
            why = f"item {index} has one row too many"
        else:
            mm[index] = mm[index][:-1]
            why = f"item {index} has one row too few ({mm[index].shape[0]})"
    else:
        mm.append(np.full((draw(st.integers(1, 3)), hidden), 7.0, np.float32))
        why = "an extra embedding item"
    spoiled = DiffCase(case.precision, case.text_bits, case.ranges, mask, tuple(mm))
    assert sum(e.shape[0] for e in mm) != int(mask.sum())
    return spoiled, why


@clause_property("diff_splice_error_matches_oracle", "DIFF-3", subject=("splice",))
def diff_splice_error_matches_oracle(parts: Parts) -> Runnable:
    precisions = splice_precisions(parts.splice())

    @given(bad=mismatched_diff_cases(precisions))
    def test(bad: tuple[DiffCase, str]) -> None:
        case, why = bad
        note(f"count mismatch ({why}) in {case.describe()}")
        splice = parts.splice()
        placeholders = int(case.mask.sum())
        error = expect_error(
            "DIFF-3",
            SpliceCountError,
            lambda: run_merge(splice, case.precision, case.text_bits, case.mm_embeds, case.mask),
            f"merging {sum(e.shape[0] for e in case.mm_embeds)} rows into {placeholders} "
            f"placeholders in {case.precision}",
        )
        expected = oracles.splice_count_message(case.mm_embeds, placeholders)
        check(str(error) == expected, "DIFF-3",
              f"in {case.precision} the message is {str(error)!r}; expected {expected!r}")

    return stateless(test)


# --- DIFF-4 -----------------------------------------------------------------------------


def encoder_precisions(encoder: Encoder) -> tuple[str, ...]:
    if isinstance(encoder, MultiPrecisionEncoder):
        return tuple(p for p in encoder.precisions if p in EPSILON)
    return ("float32",)


def _encode_batch(encoder: Encoder, items: list[tuple[ImageInput, int]], precision: str
                  ) -> list[NDArray[Any]]:
    if isinstance(encoder, MultiPrecisionEncoder):
        return encoder.encode_batch_as(items, precision)
    return encoder.encode_batch(items)


def _device_type(encoder: Encoder) -> str:
    return encoder.device_type if isinstance(encoder, MultiPrecisionEncoder) else "cpu"


def agree(alone: NDArray[Any], batched: NDArray[Any], precision: str, device_type: str) -> bool:
    """Bitwise on the CPU; elsewhere ``|alone - batched| <= 8 eps (1 + |alone|)``."""
    if alone.shape != batched.shape or alone.dtype != batched.dtype:
        return False
    if device_type == "cpu":
        return alone.tobytes() == batched.tobytes()
    a, b = alone.astype(np.float64), batched.astype(np.float64)
    return bool(np.all(np.abs(a - b) <= 8 * EPSILON[precision] * (1 + np.abs(a))))


@st.composite
def batches_around(draw: st.DrawFn) -> tuple[list[tuple[ImageInput, int]], int]:
    """A batch of 2-6 items from a small pool (repeats, equal and unequal row counts)
    and the index of the item to compare with its lone encoding."""
    pool = draw(st.lists(images(max_bytes=100, max_side=4), min_size=1, max_size=3))
    counts = st.sampled_from([1, 2]) | st.integers(1, 5)
    items = [(draw(st.sampled_from(pool)), draw(counts)) for _ in range(draw(st.integers(2, 6)))]
    return items, draw(st.integers(0, len(items) - 1))


@clause_property("diff_encode_batch_invariant", "DIFF-4", subject=("encoder",))
def diff_encode_batch_invariant(parts: Parts) -> Runnable:
    probe = parts.encoder(4)
    precisions = encoder_precisions(probe)
    device_type = _device_type(probe)

    @given(batch=batches_around(), precision=st.sampled_from(precisions),
           hidden=st.sampled_from([4]) | st.integers(1, 8))
    def test(batch: tuple[list[tuple[ImageInput, int]], int], precision: str,
             hidden: int) -> None:
        items, index = batch
        note(f"{precision} on {device_type}, hidden {hidden}; batch: "
             + "; ".join(f"{describe_image(i)} x{n}" for i, n in items))
        encoder = parts.encoder(hidden)
        batched = _encode_batch(encoder, list(items), precision)
        check(len(batched) == len(items), "DIFF-4",
              f"a batch of {len(items)} items returned {len(batched)} outputs")
        alone = _encode_batch(encoder, [items[index]], precision)[0]
        image, n = items[index]
        rule = "bitwise" if device_type == "cpu" else "within 8 eps (1 + |x|)"
        check(agree(alone, batched[index], precision, device_type), "DIFF-4",
              f"item {index} ({describe_image(image)}, {n} rows) encoded alone differs from "
              f"the same item inside the batch ({precision} on {device_type}: must agree "
              f"{rule})")

    return stateless(test)


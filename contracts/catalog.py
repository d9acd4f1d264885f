"""The contracts (docs/crosshair.md): one per pure function of ``reference/`` that the
issue names, each over a case of plain ints, each applied unchanged to any adapter.

Each ``implementation`` is a thin wrapper from the case to the adapter's component and
back to plain values; where the component takes numpy arrays or rich objects, the
wrapper builds them from the case's ints (``symbolic_inputs`` for images; a
``RequestView`` and the reference adapter's empty ``EncoderCacheManager`` for the
scheduling hook), and says so in its docstring. Bounds in the preconditions keep the symbolic
search on sizes where each clause's interesting cases live (multiples of 64 bytes,
images larger than a tile or than ``max_image_size``, items around a chunk's end).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from contracts.contract import Contract, Implementation
from contracts.symbolic_inputs import array_image, bytes_image
from harness.loader import REFERENCE_REF, load_adapter
from properties import oracles
from spec.adapter import Adapter
from spec.errors import BudgetConfigError
from spec.types import (
    DynamicResolutionPolicy,
    EncoderBudgetConfig,
    FixedPolicy,
    MultiModalItem,
    PlaceholderRange,
    ProcessorConfig,
    RequestView,
    RowBreakPolicy,
    SchedulerConfig,
    TiledPolicy,
    TokenCountPolicy,
    ToyPolicy,
)

#: The processor's special ids (``ProcessorConfig``'s defaults); text tokens are 1, 2, ...
_CONFIG = ProcessorConfig()
MARKER, PLACEHOLDER = _CONFIG.marker_id, _CONFIG.placeholder_id


def _processor_count(policy: TokenCountPolicy, adapter: Adapter, image: Any) -> int:
    """The adapter's ``num_image_tokens`` for ``image`` under ``policy``."""
    assert adapter.processor is not None
    processor = adapter.processor(ProcessorConfig(policy=policy))
    return processor.num_image_tokens(image)


def _popcount(mask: tuple[bool, ...]) -> int:
    return sum(1 for bit in mask if bit)


# --- EXP-1, EXP-2, EXP-3, EXP-5: expansion arithmetic -------------------------------------


@dataclass(frozen=True)
class ExpansionCase:
    """A prompt ``text · marker · text · marker · text`` and two byte images."""

    text_before: int
    text_between: int
    text_after: int
    first_image_bytes: int
    second_image_bytes: int


#: Expanded token ids, range offsets, range lengths, and ``num_image_tokens`` per image.
ExpansionResult = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def _expansion_pre(case: ExpansionCase) -> bool:
    return (
        0 <= case.text_before <= 3
        and 0 <= case.text_between <= 3
        and 0 <= case.text_after <= 3
        and 1 <= case.first_image_bytes <= 200
        and 1 <= case.second_image_bytes <= 200
    )


def _expansion_text(case: ExpansionCase) -> tuple[list[int], list[int], list[int]]:
    """Text token ids 1, 2, ... in prompt order, split at the two markers."""
    a, b, c = case.text_before, case.text_between, case.text_after
    return (
        list(range(1, a + 1)),
        list(range(a + 1, a + b + 1)),
        list(range(a + b + 1, a + b + c + 1)),
    )


def _expansion_post(case: ExpansionCase, result: ExpansionResult) -> str | None:
    token_ids, offsets, lengths, counts = result
    before, between, after = _expansion_text(case)
    text = before + between + after
    if len(token_ids) != len(text) + sum(counts):  # EXP-1
        return f"expanded length {len(token_ids)} != {len(text)} text + {sum(counts)} image tokens"
    if lengths != counts:  # EXP-5
        return f"range lengths {lengths} != num_image_tokens {counts}"
    expected_offsets = (len(before), len(before) + counts[0] + len(between))
    if offsets != expected_offsets:  # EXP-2
        return f"range offsets {offsets} != {expected_offsets}"
    inside = [range(o, o + n) for o, n in zip(offsets, lengths, strict=True)]
    if any(token_ids[i] != PLACEHOLDER for positions in inside for i in positions):  # EXP-2
        return "a position inside a range is not a placeholder"
    outside = [t for i, t in enumerate(token_ids) if not any(i in r for r in inside)]
    if outside != text:  # EXP-3
        return f"text outside the ranges {outside} != prompt text {text}"
    return None


def _expansion_impl(adapter: Adapter) -> Implementation[ExpansionCase, ExpansionResult] | None:
    """The adapter's ``Processor.expand`` under the toy policy, images as
    :func:`bytes_image`."""
    if adapter.processor is None:
        return None
    factory = adapter.processor

    def expand(case: ExpansionCase) -> ExpansionResult:
        processor = factory(ProcessorConfig(policy=ToyPolicy()))
        before, between, after = _expansion_text(case)
        images = [bytes_image(case.first_image_bytes), bytes_image(case.second_image_bytes)]
        out = processor.expand([*before, MARKER, *between, MARKER, *after], images)
        return (
            tuple(out.token_ids),
            tuple(r.offset for r in out.ranges),
            tuple(r.length for r in out.ranges),
            tuple(processor.num_image_tokens(image) for image in images),
        )

    return expand


EXPANSION = Contract[ExpansionCase, ExpansionResult](
    name="expansion_arithmetic",
    clauses=("EXP-1", "EXP-2", "EXP-3", "EXP-5"),
    subject="Processor.expand (toy policy, two images)",
    case_type=ExpansionCase,
    pre=_expansion_pre,
    post=_expansion_post,
    implementation=_expansion_impl,
    iterations=200,
    rejects=("exp_off_by_one_offset",),
)


# --- EXP-6..10: the token-count policies ------------------------------------------------


@dataclass(frozen=True)
class ByteSizeCase:
    num_bytes: int


@dataclass(frozen=True)
class FixedCase:
    num_tokens: int
    num_bytes: int


@dataclass(frozen=True)
class ImageSizeCase:
    height: int
    width: int


def _toy_pre(case: ByteSizeCase) -> bool:
    return 1 <= case.num_bytes <= 4096


def _toy_post(case: ByteSizeCase, tokens: int) -> str | None:
    expected = case.num_bytes // 64 + 1
    return None if tokens == expected else f"{tokens} tokens, EXP-6 says {expected}"


def _toy_impl(adapter: Adapter) -> Implementation[ByteSizeCase, int] | None:
    """The adapter's ``num_image_tokens`` under ``ToyPolicy``, image as
    :func:`bytes_image`."""
    if adapter.processor is None:
        return None
    return lambda case: _processor_count(ToyPolicy(), adapter, bytes_image(case.num_bytes))


def _fixed_pre(case: FixedCase) -> bool:
    return 1 <= case.num_tokens <= 2048 and 1 <= case.num_bytes <= 4096


def _fixed_post(case: FixedCase, tokens: int) -> str | None:
    if tokens == case.num_tokens:
        return None
    return f"{tokens} tokens for FixedPolicy({case.num_tokens})"


def _fixed_impl(adapter: Adapter) -> Implementation[FixedCase, int] | None:
    """The adapter's ``num_image_tokens`` under ``FixedPolicy(num_tokens)``."""
    if adapter.processor is None:
        return None
    return lambda case: _processor_count(
        FixedPolicy(num_tokens=case.num_tokens), adapter, bytes_image(case.num_bytes)
    )


def _image_pre(case: ImageSizeCase) -> bool:
    """Up to 4096 pixels a side, and no more elongated than Qwen2-VL accepts (200:1)."""
    h, w = case.height, case.width
    return 1 <= h <= 4096 and 1 <= w <= 4096 and max(h, w) <= 200 * min(h, w)


def _array_count(policy: TokenCountPolicy) -> Any:
    def wrap(adapter: Adapter) -> Implementation[ImageSizeCase, int] | None:
        if adapter.processor is None:
            return None
        return lambda case: _processor_count(policy, adapter, array_image(case.height, case.width))

    wrap.__doc__ = f"The adapter's ``num_image_tokens`` under ``{policy!r}``, image as array_image."
    return wrap


_DYNAMIC = DynamicResolutionPolicy()


def _dynamic_post(case: ImageSizeCase, tokens: int) -> str | None:
    """EXP-8: one token per merged patch of a resized image whose pixel count lies in
    ``[min_pixels, max_pixels]``: so ``tokens · factor²`` does too."""
    factor = _DYNAMIC.patch_size * _DYNAMIC.merge_size
    pixels = tokens * factor * factor
    if not _DYNAMIC.min_pixels <= pixels <= _DYNAMIC.max_pixels:
        return (
            f"{tokens} tokens stand for {pixels} resized pixels, outside "
            f"[{_DYNAMIC.min_pixels}, {_DYNAMIC.max_pixels}]"
        )
    return None


_TILED = TiledPolicy()


def _tiled_post(case: ImageSizeCase, tokens: int) -> str | None:
    """EXP-9: the grid closest in aspect ratio (ties to the larger grid when the image
    has its area), plus a thumbnail, times tokens per tile (``properties.oracles``)."""
    expected = oracles.tiled_num_tokens(_TILED, case.height, case.width)
    return None if tokens == expected else f"{tokens} tokens, EXP-9 says {expected}"


DYNAMIC = Contract[ImageSizeCase, int](
    name="dynamic_token_count",
    clauses=("EXP-8",),
    subject="Processor.num_image_tokens (DynamicResolutionPolicy())",
    case_type=ImageSizeCase,
    pre=_image_pre,
    post=_dynamic_post,
    implementation=_array_count(_DYNAMIC),
    iterations=200,
    rejects=("exp_dynamic_forgets_merge",),
)

TILED = Contract[ImageSizeCase, int](
    name="tiled_token_count",
    clauses=("EXP-9",),
    subject="Processor.num_image_tokens (TiledPolicy())",
    case_type=ImageSizeCase,
    pre=_image_pre,
    post=_tiled_post,
    implementation=_array_count(_TILED),
    iterations=50,  # the slowest per path: the oracle and the reference each try 12 grids
    rejects=("exp_tiled_tie_keeps_smaller",),
)

TOY = Contract[ByteSizeCase, int](
    name="toy_token_count",
    clauses=("EXP-6",),
    subject="Processor.num_image_tokens (ToyPolicy())",
    case_type=ByteSizeCase,
    pre=_toy_pre,
    post=_toy_post,
    implementation=_toy_impl,
    iterations=100,
    rejects=("exp_toy_ceil",),
)

FIXED = Contract[FixedCase, int](
    name="fixed_token_count",
    clauses=("EXP-7",),
    subject="Processor.num_image_tokens (FixedPolicy(num_tokens))",
    case_type=FixedCase,
    pre=_fixed_pre,
    post=_fixed_post,
    implementation=_fixed_impl,
    iterations=60,
    rejects=("exp_fixed_counts_cls",),
)


# EXP-10: the range of one row-break image.

_ROWBREAK = RowBreakPolicy()

#: The image's range: its token ids and its ``is_embed`` mask (``None``: all embed).
RowBreakResult = tuple[tuple[int, ...], tuple[bool, ...] | None]


def _rowbreak_pre(case: ImageSizeCase) -> bool:
    """Images within ``max_image_size``: scaling a larger one divides by a symbolic
    ratio (nonlinear real arithmetic: seconds per CrossHair iteration). The Hypothesis
    property ``exp_rowbreak_policy`` covers the scaled images."""
    limit = _ROWBREAK.max_image_size
    return 1 <= case.height <= limit and 1 <= case.width <= limit


def _scaled_side(side: int, ratio: float) -> int:
    """EXP-10's scaling: divided by ``ratio`` and floored, at least one pixel."""
    return max(1, math.floor(side / ratio)) if ratio > 1 else side


def _rowbreak_post(case: ImageSizeCase, result: RowBreakResult) -> str | None:
    """EXP-10 as a covering statement: ``rows`` rows of ``cols`` image tokens and one
    break (the last an end token), ``is_embed`` true exactly on image tokens, and the
    patches just cover the scaled image: ``(n − 1)·patch < side ≤ n·patch``."""
    tokens, is_embed = result
    if is_embed is None or len(is_embed) != len(tokens):
        return "a row-break range needs an is_embed mask as long as the range"
    if any(embed != (token == PLACEHOLDER) for token, embed in zip(tokens, is_embed, strict=True)):
        return "is_embed is not true exactly on the image tokens"
    rows = len(tokens) - _popcount(is_embed)
    if rows < 1 or len(tokens) % rows:
        return f"{len(tokens)} tokens do not split into {rows} equal rows"
    cols = len(tokens) // rows - 1
    row = (PLACEHOLDER,) * cols + (_CONFIG.break_id,)
    if tokens != row * (rows - 1) + row[:-1] + (_CONFIG.end_id,):
        return "the range is not rows of image tokens each closed by a break (last: end)"
    ratio = max(case.width / _ROWBREAK.max_image_size, case.height / _ROWBREAK.max_image_size)
    patch = _ROWBREAK.patch_size
    for name, count, side in (
        ("rows", rows, _scaled_side(case.height, ratio)),
        ("cols", cols, _scaled_side(case.width, ratio)),
    ):
        if not (count - 1) * patch < side <= count * patch:
            return f"{count} {name} of {patch}-pixel patches do not just cover {side} pixels"
    return None


def _rowbreak_impl(adapter: Adapter) -> Implementation[ImageSizeCase, RowBreakResult] | None:
    """The adapter's ``Processor.expand`` of one marker under ``RowBreakPolicy()``,
    image as :func:`array_image`."""
    if adapter.processor is None:
        return None
    factory = adapter.processor

    def expand(case: ImageSizeCase) -> RowBreakResult:
        out = factory(ProcessorConfig(policy=_ROWBREAK)).expand(
            [MARKER], [array_image(case.height, case.width)]
        )
        (placeholder_range,) = out.ranges
        return tuple(out.token_ids), placeholder_range.is_embed

    return expand


ROWBREAK = Contract[ImageSizeCase, RowBreakResult](
    name="rowbreak_range",
    clauses=("EXP-10",),
    subject="Processor.expand (RowBreakPolicy(), one image)",
    case_type=ImageSizeCase,
    pre=_rowbreak_pre,
    post=_rowbreak_post,
    implementation=_rowbreak_impl,
    iterations=200,
    rejects=("exp_pixtral_floor",),
)


# --- PlaceholderRange: get_embeds_indices_in_range and get_num_embeds --------------------


@dataclass(frozen=True)
class EmbedsCase:
    """A range of ``length`` positions; bit ``i`` of ``mask`` is ``is_embed[i]`` when
    ``has_mask`` (else no mask: every position embeds); the window ``[start, end)``."""

    length: int
    has_mask: bool
    mask: int
    start: int
    end: int

    def is_embed(self) -> tuple[bool, ...] | None:
        if not self.has_mask:
            return None
        return tuple(bool((self.mask >> i) & 1) for i in range(self.length))


#: ``get_embeds_indices_in_range(start, end)`` and ``get_num_embeds()``.
EmbedsResult = tuple[tuple[int, int], int]


def _embeds_pre(case: EmbedsCase) -> bool:
    return (
        1 <= case.length <= 8
        and 0 <= case.mask < (1 << case.length)
        and 0 <= case.start <= case.end <= case.length
    )


def _embeds_post(case: EmbedsCase, result: EmbedsResult) -> str | None:
    """EXP-5 (popcount) and WRK-3 (rows ``[a, b)`` count the embedding positions before
    ``start`` and before ``end``), whatever the implementation."""
    (first, end), num_embeds = result
    mask = case.is_embed()
    full = (True,) * case.length if mask is None else mask
    expected = (_popcount(full[: case.start]), _popcount(full[: case.end]))
    if (first, end) != expected:
        return f"rows {(first, end)} for window [{case.start}, {case.end}), expected {expected}"
    if num_embeds != _popcount(full):
        return f"get_num_embeds() = {num_embeds}, popcount of is_embed is {_popcount(full)}"
    return None


def spec_embeds(case: EmbedsCase) -> EmbedsResult:
    """``spec.types.PlaceholderRange``'s arithmetic (the shared vocabulary, the same for
    every adapter: the contract applies to it, and to its mutants)."""
    placeholder_range = PlaceholderRange(0, case.length, case.is_embed())
    return (
        placeholder_range.get_embeds_indices_in_range(case.start, case.end),
        placeholder_range.get_num_embeds(),
    )


EMBEDS = Contract[EmbedsCase, EmbedsResult](
    name="embeds_in_range",
    clauses=("EXP-5", "WRK-3"),
    subject="PlaceholderRange.get_embeds_indices_in_range / get_num_embeds (spec.types)",
    case_type=EmbedsCase,
    pre=_embeds_pre,
    post=_embeds_post,
    implementation=lambda adapter: spec_embeds,
    iterations=200,
    rejects=("mutants.embeds_end_inclusive", "mutants.embeds_ignore_mask"),
)


# --- SCH-1, SCH-4, SCH-5, SCH-7: the scheduling hook --------------------------------------


@dataclass(frozen=True)
class ScheduleCase:
    """A request with two images (distinct hashes, no ``is_embed`` mask) and one step:
    ``[computed, computed + new)`` plus the drafter shift, the step's encoder budget and
    the size of an empty encoder cache. Chunked multimodal input is enabled (SCH-6 has
    its own property)."""

    first_offset: int
    first_length: int
    gap: int
    second_length: int
    computed: int
    new: int
    budget: int
    cache_size: int
    shift: int

    def items(self) -> tuple[tuple[int, int], tuple[int, int]]:
        second_offset = self.first_offset + self.first_length + self.gap
        return (self.first_offset, self.first_length), (second_offset, self.second_length)


#: Scheduled items, ``num_new_tokens``, budget left, duplicates.
ScheduleResult = tuple[tuple[int, ...], int, int, tuple[int, ...]]


def _schedule_pre(case: ScheduleCase) -> bool:
    return (
        0 <= case.first_offset <= 12
        and 1 <= case.first_length <= 12
        and 0 <= case.gap <= 6
        and 1 <= case.second_length <= 12
        and 0 <= case.computed <= 40
        and 1 <= case.new <= 40
        and 0 <= case.budget <= 30
        and 1 <= case.cache_size <= 30
        and 0 <= case.shift <= 1
    )


def _schedule_post(case: ScheduleCase, result: ScheduleResult) -> str | None:
    """The hook's rules for an empty cache and distinct hashes: items overlapping the
    window are taken in offset order, each scheduled whole when it fits what is left of
    the budget and the cache (SCH-4, SCH-7); the first that does not fit stops the chunk
    at its doorstep and nothing after it is scheduled (SCH-5); no other item is touched
    (SCH-1); the budget left is the budget minus what was scheduled (SCH-7)."""
    scheduled, num_new, budget_left, duplicates = result
    window_end = case.computed + case.new + case.shift
    overlapping = [
        index
        for index, (offset, length) in enumerate(case.items())
        if offset < window_end and offset + length > case.computed
    ]
    if duplicates:
        return f"duplicates {duplicates} among items with distinct hashes (SCH-3)"
    if any(index not in overlapping for index in scheduled):
        return f"scheduled {scheduled}, but only items {overlapping} overlap the step (SCH-1)"
    lengths = [length for _, length in case.items()]
    if budget_left != case.budget - sum(lengths[i] for i in scheduled) or budget_left < 0:
        return f"budget left {budget_left} after scheduling {scheduled} from {case.budget} (SCH-7)"
    if not 0 <= num_new <= case.new:
        return f"num_new_tokens {num_new} outside [0, {case.new}] (SCH-7)"
    planned = 0
    for index in overlapping:
        offset, length = case.items()[index]
        fits = length <= case.budget - planned and planned + length <= case.cache_size
        if index in scheduled:
            if not fits:
                return f"item {index} ({length} embeds) scheduled beyond budget or cache (SCH-4)"
            planned += length
            continue
        if fits:
            return f"item {index} ({length} embeds) fits budget and cache but was refused (SCH-5)"
        later = [i for i in scheduled if i > index]
        if later:
            return f"items {later} scheduled after refused item {index} (SCH-5)"
        doorstep = min(case.new, offset - case.computed) if case.computed < offset else 0
        if num_new != doorstep:
            return f"chunk of {num_new} tokens, the doorstep of item {index} is {doorstep} (SCH-5)"
        return None
    if num_new != case.new:
        return f"chunk shortened to {num_new} of {case.new} with nothing refused (SCH-5)"
    if tuple(sorted(scheduled)) != tuple(scheduled):
        return f"scheduled {scheduled} out of offset order (SCH-4)"
    return None


def _schedule_impl(adapter: Adapter) -> Implementation[ScheduleCase, ScheduleResult] | None:
    """The adapter's ``SchedulingHook.try_schedule_encoder_inputs`` on a
    ``RequestView`` built from the case, with the reference's (empty)
    ``EncoderCacheManager(cache_size)`` as the cache: the contract is about the hook."""
    if adapter.scheduling_hook is None:
        return None
    factory = adapter.scheduling_hook
    # properties/ reaches the reference only through its adapter, as a fallback does.
    cache_factory = load_adapter(REFERENCE_REF).adapter.encoder_cache_manager
    assert cache_factory is not None

    def schedule(case: ScheduleCase) -> ScheduleResult:
        (first_offset, first_length), (second_offset, second_length) = case.items()
        request = RequestView(
            "contract",
            (
                MultiModalItem("img-a", PlaceholderRange(first_offset, first_length)),
                MultiModalItem("img-b", PlaceholderRange(second_offset, second_length)),
            ),
        )
        decision = factory(SchedulerConfig()).try_schedule_encoder_inputs(
            request,
            case.computed,
            case.new,
            case.budget,
            cache_factory(case.cache_size),
            case.shift,
        )
        return (
            tuple(decision.encoder_inputs_to_schedule),
            decision.num_new_tokens,
            decision.encoder_compute_budget,
            tuple(decision.duplicate_encoder_inputs),
        )

    return schedule


SCHEDULING = Contract[ScheduleCase, ScheduleResult](
    name="scheduling_hook",
    clauses=("SCH-1", "SCH-4", "SCH-5", "SCH-7"),
    subject="SchedulingHook.try_schedule_encoder_inputs (two items, empty cache)",
    case_type=ScheduleCase,
    pre=_schedule_pre,
    post=_schedule_post,
    implementation=_schedule_impl,
    iterations=150,
    rejects=(
        "sch_budget_not_decremented",
        "sch_exact_budget_refused",
        "sch_truncate_one_early",
        "sch_window_one_past",
    ),
)


# --- SCH-9: encoder budget sizing ---------------------------------------------------------


@dataclass(frozen=True)
class BudgetCase:
    configured_budget: int
    configured_cache: int
    max_batched: int
    image_tokens: int
    video_tokens: int
    disable_chunked: bool


#: ``(encoder_compute_budget, encoder_cache_size)``, or ``None`` for ``BudgetConfigError``.
BudgetResult = tuple[int, int] | None


def _budget_pre(case: BudgetCase) -> bool:
    return all(
        0 <= value <= 8192
        for value in (
            case.configured_budget,
            case.configured_cache,
            case.max_batched,
            case.image_tokens,
            case.video_tokens,
        )
    )


def _budget_post(case: BudgetCase, result: BudgetResult) -> str | None:
    """SCH-9: each at least the configured value and at least the largest item;
    ``BudgetConfigError`` exactly when chunking is disabled and the largest item is
    longer than ``max_num_batched_tokens``."""
    largest = max(case.image_tokens, case.video_tokens)
    must_refuse = case.disable_chunked and largest > case.max_batched
    if result is None:
        return None if must_refuse else "BudgetConfigError for a schedulable configuration"
    if must_refuse:
        return f"{result} for an item of {largest} > max_num_batched_tokens, never schedulable"
    budget, cache = result
    if budget < max(case.configured_budget, largest) or cache < max(case.configured_cache, largest):
        return f"budget and cache {result} below the configured ones or the largest item {largest}"
    return None


def _budget_impl(adapter: Adapter) -> Implementation[BudgetCase, BudgetResult] | None:
    """The adapter's ``SchedulingHook.compute_mm_encoder_budget`` for two modalities."""
    if adapter.scheduling_hook is None:
        return None
    factory = adapter.scheduling_hook

    def size(case: BudgetCase) -> BudgetResult:
        config = EncoderBudgetConfig(
            max_num_encoder_input_tokens=case.configured_budget,
            encoder_cache_size=case.configured_cache,
            max_num_batched_tokens=case.max_batched,
            disable_chunked_mm_input=case.disable_chunked,
        )
        hook = factory(SchedulerConfig(disable_chunked_mm_input=case.disable_chunked))
        try:
            budget, cache = hook.compute_mm_encoder_budget(
                config, {"image": case.image_tokens, "video": case.video_tokens}
            )
        except BudgetConfigError:
            return None
        return budget, cache

    return size


BUDGET = Contract[BudgetCase, BudgetResult](
    name="encoder_budget_sizing",
    clauses=("SCH-9",),
    subject="SchedulingHook.compute_mm_encoder_budget (two modalities)",
    case_type=BudgetCase,
    pre=_budget_pre,
    post=_budget_post,
    implementation=_budget_impl,
    iterations=200,
    rejects=("sch_budget_ignores_largest_item",),
)


# --- PFX-3, PFX-6: block extra keys ------------------------------------------------------


@dataclass(frozen=True)
class ExtraKeysCase:
    """Two images (hashes ``img-a``, ``img-b``) and one block ``[start, end)``."""

    first_offset: int
    first_length: int
    gap: int
    second_length: int
    start: int
    end: int

    def items(self) -> tuple[MultiModalItem, MultiModalItem]:
        second_offset = self.first_offset + self.first_length + self.gap
        return (
            MultiModalItem("img-a", PlaceholderRange(self.first_offset, self.first_length)),
            MultiModalItem("img-b", PlaceholderRange(second_offset, self.second_length)),
        )


ExtraKeysResult = tuple[tuple[str, int], ...]


def _keys_pre(case: ExtraKeysCase) -> bool:
    return (
        0 <= case.first_offset <= 24
        and 1 <= case.first_length <= 24
        and 0 <= case.gap <= 8
        and 1 <= case.second_length <= 24
        and 0 <= case.start < case.end <= 64
    )


def _keys_post(case: ExtraKeysCase, keys: ExtraKeysResult) -> str | None:
    """PFX-3 and PFX-6: ``(mm_hash, offset − start)`` for every item overlapping the
    block, in item order, and nothing else."""
    expected = tuple(
        (item.mm_hash, item.mm_position.offset - case.start)
        for item in case.items()
        if item.mm_position.offset < case.end and item.mm_position.end > case.start
    )
    return None if keys == expected else f"extra keys {keys}, expected {expected}"


def _keys_impl(adapter: Adapter) -> Implementation[ExtraKeysCase, ExtraKeysResult] | None:
    """The adapter's ``BlockHasher(end − start).block_extra_keys``."""
    if adapter.block_hasher is None:
        return None
    factory = adapter.block_hasher

    def keys(case: ExtraKeysCase) -> ExtraKeysResult:
        hasher = factory(case.end - case.start)
        return tuple(
            (str(h), int(o)) for h, o in hasher.block_extra_keys(case.items(), case.start, case.end)
        )

    return keys


EXTRA_KEYS = Contract[ExtraKeysCase, ExtraKeysResult](
    name="block_extra_keys",
    clauses=("PFX-3", "PFX-6"),
    subject="BlockHasher.block_extra_keys (two items)",
    case_type=ExtraKeysCase,
    pre=_keys_pre,
    post=_keys_post,
    implementation=_keys_impl,
    iterations=60,
    rejects=("pfx_no_offset", "pfx_key_by_size"),
)


#: Every contract, in report order.
CONTRACTS: tuple[Contract[Any, Any], ...] = (
    EXPANSION,
    TOY,
    FIXED,
    DYNAMIC,
    TILED,
    ROWBREAK,
    EMBEDS,
    SCHEDULING,
    BUDGET,
    EXTRA_KEYS,
)


def contract_named(name: str) -> Contract[Any, Any]:
    for contract in CONTRACTS:
        if contract.name == name:
            return contract
    known = ", ".join(c.name for c in CONTRACTS)
    raise KeyError(f"no contract {name!r}; the contracts are {known}")

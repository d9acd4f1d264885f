"""The contracts (docs/crosshair.md): one per pure function of ``reference/`` that the
issue names, each over a case of plain ints, each applied unchanged to any adapter.

The contracts are one table, :data:`_TABLE`: a row per contract with its name, clauses,
subject, case type, iteration bound, the zoo entries and mutants it must reject, and its
domain as data (each bounded field's inclusive range, checked in the row's order, then
any relation between fields that a range cannot say). What is code sits above the
table: each family's case type, its postcondition and its wrapper.

Each ``implementation`` is a thin wrapper from the case to the adapter's component and
back to plain values (:func:`_via`: ``None`` when the adapter lacks the component);
where the component takes numpy arrays or rich objects, the wrapper builds them from the
case's ints (``symbolic_inputs`` for images; a ``RequestView`` and the reference
adapter's empty ``EncoderCacheManager`` for the scheduling hook), and says so in its
docstring. Bounds in the preconditions keep the symbolic search on sizes where each
clause's interesting cases live (multiples of 64 bytes, images larger than a tile or
than ``max_image_size``, items around a chunk's end).

Over 400 lines (742) because a table: one row per CrossHair contract, data rather than
logic.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from contracts.contract import Contract, Implementation
from contracts.symbolic_inputs import array_image, bytes_image
from harness.loader import REFERENCE_REF, load_adapter
from properties import oracles
from spec.adapter import Adapter
from spec.components import BlockExtraKeys, BlockHasher, Processor, SchedulingHook
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

ProcessorFactory = Callable[[ProcessorConfig], Processor]


def _popcount(mask: tuple[bool, ...]) -> int:
    return sum(1 for bit in mask if bit)


def _via(
    component: str, build: Callable[[Any], Implementation[Any, Any]]
) -> Callable[[Adapter], Implementation[Any, Any] | None]:
    """A contract's ``implementation``: ``build`` applied to the adapter's ``component``
    factory (e.g. ``"processor"``), or ``None`` when the adapter lacks it. The wrapper's
    docstring is ``build``'s."""

    def implementation(adapter: Adapter) -> Implementation[Any, Any] | None:
        factory = getattr(adapter, component)
        return None if factory is None else build(factory)

    implementation.__doc__ = build.__doc__
    return implementation


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


def _expand_two(processor: ProcessorFactory) -> Implementation[ExpansionCase, ExpansionResult]:
    """The adapter's ``Processor.expand`` under the toy policy, images as
    :func:`bytes_image`."""

    def expand(case: ExpansionCase) -> ExpansionResult:
        expander = processor(ProcessorConfig(policy=ToyPolicy()))
        before, between, after = _expansion_text(case)
        images = [bytes_image(case.first_image_bytes), bytes_image(case.second_image_bytes)]
        out = expander.expand([*before, MARKER, *between, MARKER, *after], images)
        return (
            tuple(out.token_ids),
            tuple(r.offset for r in out.ranges),
            tuple(r.length for r in out.ranges),
            tuple(expander.num_image_tokens(image) for image in images),
        )

    return expand


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


def _count(
    policy_of: Callable[[Any], TokenCountPolicy], image_of: Callable[[Any], Any], doc: str
) -> Callable[[ProcessorFactory], Implementation[Any, int]]:
    """A wrapper: the adapter's ``num_image_tokens`` of ``image_of(case)`` under
    ``policy_of(case)`` (the policy built first, then the image, then the processor)."""

    def build(processor: ProcessorFactory) -> Implementation[Any, int]:
        def count(case: Any) -> int:
            policy, image = policy_of(case), image_of(case)
            return processor(ProcessorConfig(policy=policy)).num_image_tokens(image)

        return count

    build.__doc__ = doc
    return build


def _toy_post(case: ByteSizeCase, tokens: int) -> str | None:
    expected = case.num_bytes // 64 + 1
    return None if tokens == expected else f"{tokens} tokens, EXP-6 says {expected}"


_TOY_COUNT = _count(
    lambda case: ToyPolicy(),
    lambda case: bytes_image(case.num_bytes),
    "The adapter's ``num_image_tokens`` under ``ToyPolicy``, image as :func:`bytes_image`.",
)


def _fixed_post(case: FixedCase, tokens: int) -> str | None:
    if tokens == case.num_tokens:
        return None
    return f"{tokens} tokens for FixedPolicy({case.num_tokens})"


_FIXED_COUNT = _count(
    lambda case: FixedPolicy(num_tokens=case.num_tokens),
    lambda case: bytes_image(case.num_bytes),
    "The adapter's ``num_image_tokens`` under ``FixedPolicy(num_tokens)``.",
)


def _not_too_elongated(case: ImageSizeCase) -> bool:
    """No more elongated than Qwen2-VL accepts (200:1)."""
    return max(case.height, case.width) <= 200 * min(case.height, case.width)


def _array_count(
    policy: TokenCountPolicy,
) -> Callable[[ProcessorFactory], Implementation[Any, int]]:
    return _count(
        lambda case: policy,
        lambda case: array_image(case.height, case.width),
        f"The adapter's ``num_image_tokens`` under ``{policy!r}``, image as array_image.",
    )


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


# EXP-10: the range of one row-break image.

_ROWBREAK = RowBreakPolicy()

#: The image's range: its token ids and its ``is_embed`` mask (``None``: all embed).
RowBreakResult = tuple[tuple[int, ...], tuple[bool, ...] | None]


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


def _expand_rowbreak(processor: ProcessorFactory) -> Implementation[ImageSizeCase, RowBreakResult]:
    """The adapter's ``Processor.expand`` of one marker under ``RowBreakPolicy()``,
    image as :func:`array_image`."""

    def expand(case: ImageSizeCase) -> RowBreakResult:
        out = processor(ProcessorConfig(policy=_ROWBREAK)).expand(
            [MARKER], [array_image(case.height, case.width)]
        )
        (placeholder_range,) = out.ranges
        return tuple(out.token_ids), placeholder_range.is_embed

    return expand


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


def _mask_and_window(case: EmbedsCase) -> bool:
    """A mask of ``length`` bits, and a window inside the range."""
    return 0 <= case.mask < (1 << case.length) and 0 <= case.start <= case.end <= case.length


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


def _schedule_two(
    hook: Callable[[SchedulerConfig], SchedulingHook],
) -> Implementation[ScheduleCase, ScheduleResult]:
    """The adapter's ``SchedulingHook.try_schedule_encoder_inputs`` on a
    ``RequestView`` built from the case, with the reference's (empty)
    ``EncoderCacheManager(cache_size)`` as the cache: the contract is about the hook."""
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
        decision = hook(SchedulerConfig()).try_schedule_encoder_inputs(
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


def _size_budget(
    hook: Callable[[SchedulerConfig], SchedulingHook],
) -> Implementation[BudgetCase, BudgetResult]:
    """The adapter's ``SchedulingHook.compute_mm_encoder_budget`` for two modalities."""

    def size(case: BudgetCase) -> BudgetResult:
        config = EncoderBudgetConfig(
            max_num_encoder_input_tokens=case.configured_budget,
            encoder_cache_size=case.configured_cache,
            max_num_batched_tokens=case.max_batched,
            disable_chunked_mm_input=case.disable_chunked,
        )
        sizer = hook(SchedulerConfig(disable_chunked_mm_input=case.disable_chunked))
        try:
            budget, cache = sizer.compute_mm_encoder_budget(
                config, {"image": case.image_tokens, "video": case.video_tokens}
            )
        except BudgetConfigError:
            return None
        return budget, cache

    return size


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


def _block_after_start(case: ExtraKeysCase) -> bool:
    """A non-empty block ``[start, end)`` inside ``[0, 64]``."""
    return 0 <= case.start < case.end <= 64


def _keys_post(case: ExtraKeysCase, keys: ExtraKeysResult) -> str | None:
    """PFX-3 and PFX-6: ``(mm_hash, offset − start)`` for every item overlapping the
    block, in item order, and nothing else."""
    expected = tuple(
        (item.mm_hash, item.mm_position.offset - case.start)
        for item in case.items()
        if item.mm_position.offset < case.end and item.mm_position.end > case.start
    )
    return None if keys == expected else f"extra keys {keys}, expected {expected}"


def _block_keys(
    hasher: Callable[[int], BlockHasher],
) -> Implementation[ExtraKeysCase, ExtraKeysResult]:
    """The adapter's ``BlockHasher(end − start).block_extra_keys``."""

    def keys(case: ExtraKeysCase) -> ExtraKeysResult:
        block_hasher = cast(BlockExtraKeys, hasher(case.end - case.start))
        return tuple(
            (str(h), int(o))
            for h, o in block_hasher.block_extra_keys(case.items(), case.start, case.end)
        )

    return keys


def _block_keys_if_provided(adapter: Adapter) -> Implementation[Any, Any] | None:
    """:func:`_block_keys` for an adapter whose block hasher has the optional
    ``block_extra_keys`` (``spec.components.BlockExtraKeys``); ``None`` otherwise."""
    factory = adapter.block_hasher
    if factory is None or not callable(getattr(factory(1), "block_extra_keys", None)):
        return None
    return _block_keys(factory)


# --- the table ---------------------------------------------------------------------------

#: A precondition's box: each named field of the case within ``[low, high]``.
Bounds = Mapping[str, tuple[int, int]]


class _Row(NamedTuple):
    """One contract's data; the code it names is above."""

    name: str
    clauses: tuple[str, ...]
    subject: str
    case_type: type[Any]
    #: The domain: each field within its bounds, checked in this order...
    bounds: Bounds
    #: ...then what bounds cannot say (a relation between fields), or ``None``.
    relation: Callable[[Any], bool] | None
    post: Callable[[Any, Any], str | None]
    implementation: Callable[[Adapter], Implementation[Any, Any] | None]
    iterations: int
    rejects: tuple[str, ...]


_SIDES_4096 = {"height": (1, 4096), "width": (1, 4096)}

#: The contracts' data, a row each, in report order. Columns: name, clauses; subject,
#: case type; bounds, relation; postcondition, implementation; iterations, rejects.
_TABLE: tuple[_Row, ...] = (
    _Row(
        "expansion_arithmetic", ("EXP-1", "EXP-2", "EXP-3", "EXP-5"),
        "Processor.expand (toy policy, two images)", ExpansionCase,
        {"text_before": (0, 3), "text_between": (0, 3), "text_after": (0, 3),
         "first_image_bytes": (1, 200), "second_image_bytes": (1, 200)}, None,
        _expansion_post, _via("processor", _expand_two),
        200, ("exp_off_by_one_offset",),
    ),
    _Row(
        "toy_token_count", ("EXP-6",),
        "Processor.num_image_tokens (ToyPolicy())", ByteSizeCase,
        {"num_bytes": (1, 4096)}, None,
        _toy_post, _via("processor", _TOY_COUNT),
        100, ("exp_toy_ceil",),
    ),
    _Row(
        "fixed_token_count", ("EXP-7",),
        "Processor.num_image_tokens (FixedPolicy(num_tokens))", FixedCase,
        {"num_tokens": (1, 2048), "num_bytes": (1, 4096)}, None,
        _fixed_post, _via("processor", _FIXED_COUNT),
        60, ("exp_fixed_counts_cls",),
    ),
    _Row(
        "dynamic_token_count", ("EXP-8",),
        "Processor.num_image_tokens (DynamicResolutionPolicy())", ImageSizeCase,
        _SIDES_4096, _not_too_elongated,
        _dynamic_post, _via("processor", _array_count(_DYNAMIC)),
        200, ("exp_dynamic_forgets_merge",),
    ),
    _Row(
        "tiled_token_count", ("EXP-9",),
        "Processor.num_image_tokens (TiledPolicy())", ImageSizeCase,
        _SIDES_4096, _not_too_elongated,
        _tiled_post, _via("processor", _array_count(_TILED)),
        # the slowest per path: the oracle and the reference each try 12 grids
        50, ("exp_tiled_tie_keeps_smaller",),
    ),
    _Row(
        "rowbreak_range", ("EXP-10",),
        "Processor.expand (RowBreakPolicy(), one image)", ImageSizeCase,
        # within max_image_size: scaling a larger image divides by a symbolic ratio
        # (nonlinear real arithmetic: seconds per CrossHair iteration); the Hypothesis
        # property exp_rowbreak_policy covers the scaled images
        {"height": (1, _ROWBREAK.max_image_size), "width": (1, _ROWBREAK.max_image_size)}, None,
        _rowbreak_post, _via("processor", _expand_rowbreak),
        200, ("exp_pixtral_floor",),
    ),
    _Row(
        "embeds_in_range", ("EXP-5", "WRK-3"),
        "PlaceholderRange.get_embeds_indices_in_range / get_num_embeds (spec.types)", EmbedsCase,
        {"length": (1, 8)}, _mask_and_window,
        _embeds_post, lambda adapter: spec_embeds,
        200, ("mutants.embeds_end_inclusive", "mutants.embeds_ignore_mask"),
    ),
    _Row(
        "scheduling_hook", ("SCH-1", "SCH-4", "SCH-5", "SCH-7"),
        "SchedulingHook.try_schedule_encoder_inputs (two items, empty cache)", ScheduleCase,
        {"first_offset": (0, 12), "first_length": (1, 12), "gap": (0, 6),
         "second_length": (1, 12), "computed": (0, 40), "new": (1, 40), "budget": (0, 30),
         "cache_size": (1, 30), "shift": (0, 1)}, None,
        _schedule_post, _via("scheduling_hook", _schedule_two),
        150, ("sch_budget_not_decremented", "sch_exact_budget_refused",
              "sch_truncate_one_early", "sch_window_one_past"),
    ),
    _Row(
        "encoder_budget_sizing", ("SCH-9",),
        "SchedulingHook.compute_mm_encoder_budget (two modalities)", BudgetCase,
        {"configured_budget": (0, 8192), "configured_cache": (0, 8192),
         "max_batched": (0, 8192), "image_tokens": (0, 8192), "video_tokens": (0, 8192)}, None,
        _budget_post, _via("scheduling_hook", _size_budget),
        200, ("sch_budget_ignores_largest_item",),
    ),
    _Row(
        "block_extra_keys", ("PFX-3", "PFX-6"),
        "BlockHasher.block_extra_keys (two items)", ExtraKeysCase,
        {"first_offset": (0, 24), "first_length": (1, 24), "gap": (0, 8),
         "second_length": (1, 24)}, _block_after_start,
        _keys_post, _block_keys_if_provided,
        60, ("pfx_no_offset", "pfx_key_by_size"),
    ),
)


def _precondition(row: _Row) -> Callable[[Any], bool]:
    """``row``'s domain as a predicate: the bounds in order, then the relation."""
    fields = {field.name for field in dataclasses.fields(row.case_type)}
    assert set(row.bounds) <= fields, f"{row.name}: no field {set(row.bounds) - fields}"
    bounds = tuple(row.bounds.items())
    relation = row.relation

    def pre(case: Any) -> bool:
        for field, (low, high) in bounds:
            if not low <= getattr(case, field) <= high:
                return False
        return relation is None or relation(case)

    return pre


def _contract(row: _Row) -> Contract[Any, Any]:
    return Contract(
        name=row.name,
        clauses=row.clauses,
        subject=row.subject,
        case_type=row.case_type,
        pre=_precondition(row),
        post=row.post,
        implementation=row.implementation,
        iterations=row.iterations,
        rejects=row.rejects,
    )


#: Every contract, in report order.
CONTRACTS: tuple[Contract[Any, Any], ...] = tuple(_contract(row) for row in _TABLE)


def contract_named(name: str) -> Contract[Any, Any]:
    for contract in CONTRACTS:
        if contract.name == name:
            return contract
    known = ", ".join(c.name for c in CONTRACTS)
    raise KeyError(f"no contract {name!r}; the contracts are {known}")


EXPANSION = contract_named("expansion_arithmetic")
TOY = contract_named("toy_token_count")
FIXED = contract_named("fixed_token_count")
DYNAMIC = contract_named("dynamic_token_count")
TILED = contract_named("tiled_token_count")
ROWBREAK = contract_named("rowbreak_range")
EMBEDS = contract_named("embeds_in_range")
SCHEDULING = contract_named("scheduling_hook")
BUDGET = contract_named("encoder_budget_sizing")
EXTRA_KEYS = contract_named("block_extra_keys")

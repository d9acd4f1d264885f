"""EXP — placeholder expansion (SPEC.md EXP-1..10).

A prompt carries one marker per image; the processor replaces the i-th marker by the
i-th image's placeholder tokens and records a ``PlaceholderRange`` for it. The
properties state the clauses on prompts aimed at the hard cases (markers at position 0,
adjacent, at the end; special ids that are small or shuffled; image sizes on the
policies' rounding boundaries), and check the token-count policies against the
independent arithmetic in ``properties.oracles``.

Over 400 lines (520) because the EXP family's properties (EXP-1..10), one clause
property each, read beside SPEC.md's EXP section.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from hypothesis import example, given, note
from hypothesis import strategies as st

from properties import oracles
from properties.framework import Parts, Runnable, check, clause_property, expect_error, stateless
from properties.strategies import (
    PromptCase,
    describe_image,
    describe_range,
    dynamic_policies,
    fixed_policies,
    images,
    images_for_policy,
    prompt_cases,
    rowbreak_policies,
    shaped_image,
    shaped_images,
    tiled_policies,
)
from spec.components import Processor
from spec.errors import InvalidInputError, MarkerCountError
from spec.types import (
    DynamicResolutionPolicy,
    ExpandedPrompt,
    FixedPolicy,
    ImageInput,
    ProcessorConfig,
    RowBreakPolicy,
    TiledPolicy,
    TokenCountPolicy,
    ToyPolicy,
)


def _expand(processor: Processor, case: PromptCase) -> ExpandedPrompt:
    note(f"expanding: {case.describe()}")
    out = processor.expand(list(case.prompt), list(case.images))
    note(f"expanded to {len(out.token_ids)} tokens, ranges "
         f"{[describe_range(r) for r in out.ranges]}")
    return out


def _outside_ranges(out: ExpandedPrompt) -> list[int]:
    inside: set[int] = set()
    for r in out.ranges:
        inside.update(range(r.offset, r.end))
    return [t for i, t in enumerate(out.token_ids) if i not in inside]


# --- EXP-1 -----------------------------------------------------------------------------


@clause_property("exp_total_length", "EXP-1", subject=("processor",))
def exp_total_length(parts: Parts) -> Runnable:
    """EXP-1: the expanded prompt has len(prompt) - markers + the ranges' lengths tokens."""

    @given(case=prompt_cases())
    def test(case: PromptCase) -> None:
        out = _expand(parts.processor(case.config), case)
        markers = len(case.marker_positions)
        expected = len(case.prompt) - markers + sum(r.length for r in out.ranges)
        check(
            len(out.token_ids) == expected,
            "EXP-1",
            f"expanded prompt has {len(out.token_ids)} tokens; a prompt of {len(case.prompt)} "
            f"tokens with {markers} markers and ranges of lengths "
            f"{[r.length for r in out.ranges]} must have {expected}",
        )

    return stateless(test)


# --- EXP-2 -----------------------------------------------------------------------------


@clause_property("exp_ranges_well_formed", "EXP-2", subject=("processor",))
def exp_ranges_well_formed(parts: Parts) -> Runnable:
    """EXP-2: one range per image, where its marker stood, sorted, disjoint, in bounds;
    range positions hold placeholder/break/end tokens and no other position does."""

    @given(case=prompt_cases())
    def test(case: PromptCase) -> None:
        config = case.config
        out = _expand(parts.processor(config), case)
        check(
            len(out.ranges) == len(case.images),
            "EXP-2",
            f"{len(case.images)} images gave {len(out.ranges)} ranges; expected one per image",
        )
        total = len(out.token_ids)
        previous_end = 0
        for i, (r, marker_pos) in enumerate(zip(out.ranges, case.marker_positions, strict=False)):
            check(
                r.offset >= previous_end,
                "EXP-2",
                f"range {i} {describe_range(r)} starts before the previous range ends "
                f"({previous_end}): ranges must be sorted and disjoint",
            )
            check(
                r.end <= total,
                "EXP-2",
                f"range {i} {describe_range(r)} ends past the expanded prompt ({total} tokens)",
            )
            # Marker order: range i stands where marker i stood, shifted by the growth of
            # the ranges before it.
            expected_offset = marker_pos - i + sum(p.length for p in out.ranges[:i])
            check(
                r.offset == expected_offset,
                "EXP-2",
                f"marker {i} is at prompt position {marker_pos}, so its range must start at "
                f"{expected_offset}; it starts at {r.offset}",
            )
            previous_end = r.end
        image_tokens = {config.placeholder_id, config.break_id, config.end_id}
        inside: set[int] = set()
        for i, r in enumerate(out.ranges):
            positions = range(r.offset, min(r.end, total))
            inside.update(positions)
            bad = next((p for p in positions if out.token_ids[p] not in image_tokens), None)
            check(
                bad is None,
                "EXP-2",
                f"position {bad} of range {i} holds "
                f"{out.token_ids[bad] if bad is not None else None}, not a placeholder "
                f"({config.placeholder_id}), break or end token",
            )
        specials = config.special_ids()
        stray = next(
            (p for p, t in enumerate(out.token_ids) if p not in inside and t in specials), None
        )
        check(
            stray is None,
            "EXP-2",
            f"position {stray} is outside every range but holds special token "
            f"{out.token_ids[stray] if stray is not None else None}",
        )

    return stateless(test)


# --- EXP-3 -----------------------------------------------------------------------------


@clause_property("exp_text_preserved", "EXP-3", subject=("processor",))
def exp_text_preserved(parts: Parts) -> Runnable:
    """EXP-3: outside the ranges, the expanded prompt is the prompt minus its markers."""

    @given(case=prompt_cases())
    def test(case: PromptCase) -> None:
        out = _expand(parts.processor(case.config), case)
        text = [t for t in case.prompt if t != case.config.marker_id]
        kept = _outside_ranges(out)
        check(
            kept == text,
            "EXP-3",
            f"outside the ranges the expanded prompt reads {kept}; the prompt's text "
            f"(markers removed) is {text}",
        )

    return stateless(test)


# --- EXP-4 -----------------------------------------------------------------------------


@st.composite
def _mismatched_cases(draw: st.DrawFn) -> PromptCase:
    """A prompt whose marker count differs from its image count: images missing (the
    last, or all), or extra images (one or more, also with no markers at all)."""
    case = draw(prompt_cases(min_images=0, max_images=3))
    imgs = list(case.images)
    drop_some = draw(st.booleans())
    if imgs and drop_some:
        drop = draw(st.integers(1, len(imgs)))
        imgs = imgs[: len(imgs) - drop]
    else:
        extra = draw(st.integers(1, 2))
        imgs += [draw(images_for_policy(case.config.policy, 24)) for _ in range(extra)]
    return PromptCase(case.config, case.prompt, tuple(imgs))


@clause_property("exp_marker_mismatch_rejected", "EXP-4", subject=("processor",))
def exp_marker_mismatch_rejected(parts: Parts) -> Runnable:
    """EXP-4: markers != images raises MarkerCountError (never a silent truncation)."""

    @given(case=_mismatched_cases())
    def test(case: PromptCase) -> None:
        processor = parts.processor(case.config)
        markers = len(case.marker_positions)
        note(f"{markers} markers, {len(case.images)} images: {case.describe()}")
        expect_error(
            "EXP-4",
            MarkerCountError,
            lambda: processor.expand(list(case.prompt), list(case.images)),
            f"expanding a prompt with {markers} markers and {len(case.images)} images",
        )

    return stateless(test)


_NON_IMAGES: list[object] = ["an image", 7, None, 1.5, [b"\x01\x02"], {"image": b"\x01"}]


@st.composite
def _bad_inputs(draw: st.DrawFn) -> tuple[PromptCase, str]:
    """A well-formed case spoiled in one way: a non-image item, a special id (other than
    the marker) used as text, a negative token, a token id that is not an int (a bool,
    a float, a string), or a zero-size image."""
    kind = draw(st.sampled_from(
        ["non_image", "special_as_text", "negative", "not_an_int", "empty_image"]
    ))
    text_kinds = ("special_as_text", "negative", "not_an_int")
    case = draw(prompt_cases(min_images=0 if kind in text_kinds else 1))
    prompt: list[Any] = list(case.prompt)
    imgs: list[Any] = list(case.images)
    config = case.config
    if kind == "non_image":
        i = draw(st.integers(0, len(imgs) - 1))
        imgs[i] = draw(st.sampled_from(_NON_IMAGES))
        why = f"image {i} is {imgs[i]!r}, not an image"
    elif kind == "empty_image":
        i = draw(st.integers(0, len(imgs) - 1))
        empties: list[ImageInput] = [np.zeros((0, 4), np.uint8), np.zeros((3, 0), np.uint8),
                                     np.zeros((2, 2, 0), np.uint8)]
        if isinstance(config.policy, (ToyPolicy, FixedPolicy)):
            empties.append(b"")
        imgs[i] = draw(st.sampled_from(empties))
        why = f"image {i} is empty ({describe_image(imgs[i])})"
    else:
        pos = draw(st.integers(0, len(prompt)))
        token: object
        if kind == "negative":
            token = draw(st.sampled_from([-1]) | st.integers(-(2**31), -1))
        elif kind == "not_an_int":
            token = draw(st.sampled_from([True, False, 1.0, 7.5, "7", np.float32(3)]))
        else:
            token = draw(st.sampled_from([config.placeholder_id, config.break_id,
                                          config.end_id]))
        prompt.insert(pos, token)
        why = f"token {token!r} at prompt position {pos}"
    return PromptCase(config, tuple(prompt), tuple(imgs)), why


@clause_property("exp_bad_input_rejected", "EXP-4", subject=("processor",))
def exp_bad_input_rejected(parts: Parts) -> Runnable:
    """EXP-4: a non-image item, a special id as text, a negative or non-int token or a
    zero-size image raises InvalidInputError naming the problem."""

    @given(bad=_bad_inputs())
    def test(bad: tuple[PromptCase, str]) -> None:
        case, why = bad
        processor = parts.processor(case.config)
        note(f"bad input: {why}; {case.describe()}")
        error = expect_error(
            "EXP-4",
            InvalidInputError,
            lambda: processor.expand(list(case.prompt), list(case.images)),
            f"expanding with {why}",
        )
        check(
            not isinstance(error, MarkerCountError),
            "EXP-4",
            f"with {why} (markers and images agree in number) the error must name the "
            f"problem, not a marker count: {error}",
        )
        check(str(error) != "", "EXP-4", f"with {why} the InvalidInputError has no message")
        # Fixed inputs, drawn from nothing (the drawn cases stay as they were): a policy
        # parameter that is not a positive int, a special id that is not a non-negative
        # int, and a prompt of valid text ids that is not a list or tuple.
        for config, what in _BAD_CONFIGS:
            expect_error("EXP-4", InvalidInputError, partial(parts.processor, config),
                         f"building a processor with {what}")
        default = parts.processor(ProcessorConfig())
        expect_error("EXP-4", InvalidInputError, partial(default.expand, range(1, 4), []),
                     "expanding range(1, 4), token ids in a range (not a list or tuple)")

    return stateless(test)


#: Processor configs with a policy parameter that is not a positive int, or a special
#: token id that is not a non-negative int (EXP-4).
_BAD_CONFIGS: tuple[tuple[ProcessorConfig, str], ...] = (
    (ProcessorConfig(policy=FixedPolicy(num_tokens=0)), "FixedPolicy.num_tokens 0"),
    (ProcessorConfig(policy=FixedPolicy(num_tokens=True)), "FixedPolicy.num_tokens True"),
    (ProcessorConfig(marker_id=-1), "marker_id -1"),
    (ProcessorConfig(marker_id=True), "marker_id True (a bool)"),
)


# --- EXP-5 -----------------------------------------------------------------------------


@clause_property("exp_range_matches_policy", "EXP-5", subject=("processor",))
def exp_range_matches_policy(parts: Parts) -> Runnable:
    """EXP-5: each range's length is num_image_tokens(image); get_num_embeds() is the
    popcount of is_embed."""

    @given(case=prompt_cases(min_images=1))
    def test(case: PromptCase) -> None:
        processor = parts.processor(case.config)
        out = _expand(processor, case)
        for i, (r, image) in enumerate(zip(out.ranges, case.images, strict=False)):
            n = processor.num_image_tokens(image)
            check(
                r.length == n,
                "EXP-5",
                f"range {i} {describe_range(r)} has length {r.length} but "
                f"num_image_tokens({describe_image(image)}) is {n}",
            )
            popcount = r.length if r.is_embed is None else sum(1 for b in r.is_embed if b)
            check(
                r.is_embed is None or len(r.is_embed) == r.length,
                "EXP-5",
                f"range {i} has a mask of {len(r.is_embed or ())} entries for length {r.length}",
            )
            check(
                r.get_num_embeds() == popcount,
                "EXP-5",
                f"range {i} {describe_range(r)}: get_num_embeds() is {r.get_num_embeds()}, "
                f"the popcount of is_embed is {popcount}",
            )

    return stateless(test)


# --- EXP-6..10: the policies -----------------------------------------------------------


def _check_policy(
    parts: Parts,
    config: ProcessorConfig,
    imgs: list[ImageInput],
    clause: str,
    why: Callable[[ImageInput], str],
) -> ExpandedPrompt:
    """num_image_tokens of each image and the range lengths of a prompt with one marker
    per image (the first at position 0, the others after one text token) both equal the
    oracle's count."""
    processor = parts.processor(config)
    policy: TokenCountPolicy = config.policy
    for image in imgs:
        expected = oracles.policy_num_tokens(policy, image)
        got = processor.num_image_tokens(image)
        note(f"{policy}: {describe_image(image)} -> {expected} tokens ({why(image)}); "
             f"num_image_tokens says {got}")
        check(got == expected, clause,
              f"under {policy}, {describe_image(image)} must be {expected} tokens "
              f"({why(image)}); num_image_tokens returned {got}")
    prompt: list[int] = []
    for _ in imgs:
        prompt += [config.marker_id, 7]
    out = processor.expand(prompt, imgs)
    check(len(out.ranges) == len(imgs), clause,
          f"{len(imgs)} images gave {len(out.ranges)} ranges")
    for r, image in zip(out.ranges, imgs, strict=True):
        expected = oracles.policy_num_tokens(policy, image)
        check(r.length == expected, clause,
              f"under {policy}, the range of {describe_image(image)} must have length "
              f"{expected} ({why(image)}); it is {describe_range(r)}")
    return out


@clause_property("exp_toy_policy", "EXP-6", subject=("processor",))
def exp_toy_policy(parts: Parts) -> Runnable:
    """EXP-6: under ToyPolicy an image of n bytes is n // 64 + 1 tokens."""

    @given(imgs=st.lists(images(max_bytes=400, max_side=12), min_size=1, max_size=3))
    def test(imgs: list[ImageInput]) -> None:
        _check_policy(parts, ProcessorConfig(policy=ToyPolicy()), imgs, "EXP-6",
                      lambda im: f"{oracles.image_nbytes(im)} bytes // 64 + 1")

    return stateless(test)


@clause_property("exp_fixed_policy", "EXP-7", subject=("processor",))
def exp_fixed_policy(parts: Parts) -> Runnable:
    """EXP-7: under FixedPolicy(n) every image is n tokens, whatever its size."""

    any_image = images(max_bytes=400) | shaped_images(1, 3000)

    @given(policy=fixed_policies(600), imgs=st.lists(any_image, min_size=1, max_size=3))
    def test(policy: Any, imgs: list[ImageInput]) -> None:
        _check_policy(parts, ProcessorConfig(policy=policy), imgs, "EXP-7",
                      lambda im: f"fixed at {policy.num_tokens} whatever the size")

    return stateless(test)


@st.composite
def _policy_and_images(
    draw: st.DrawFn, policies: st.SearchStrategy[Any], max_side: int
) -> tuple[Any, list[ImageInput]]:
    policy = draw(policies)
    n = draw(st.integers(1, 2))
    return policy, [draw(images_for_policy(policy, max_side)) for _ in range(n)]


@clause_property("exp_dynamic_policy", "EXP-8", subject=("processor",))
def exp_dynamic_policy(parts: Parts) -> Runnable:
    """EXP-8: under DynamicResolutionPolicy the count is Qwen2-VL's smart_resize grid of
    merged patches."""

    def why(policy: Any) -> Any:
        def explain(image: Any) -> str:
            h, w = oracles.image_height_width(image)
            factor = policy.patch_size * policy.merge_size
            h2, w2 = oracles.smart_resize(h, w, factor, policy.min_pixels, policy.max_pixels)
            return f"{h}x{w} resized to {h2}x{w2}, {h2 // factor}x{w2 // factor} merged patches"
        return explain

    # Boundaries random images rarely hit exactly. A 57x56 image rounds to exactly
    # max_pixels, or min_pixels (2x2 merged patches of 28): kept, neither shrunk nor
    # grown. An aspect ratio of exactly 200 is still accepted (upstream refuses above).
    @example(case=(DynamicResolutionPolicy(min_pixels=784, max_pixels=3136),
                    [shaped_image(57, 56)]))
    @example(case=(DynamicResolutionPolicy(min_pixels=3136), [shaped_image(57, 56)]))
    @example(case=(DynamicResolutionPolicy(), [shaped_image(1, 200)]))
    @given(case=_policy_and_images(dynamic_policies(), 2500))
    def test(case: tuple[Any, list[ImageInput]]) -> None:
        policy, imgs = case
        _check_policy(parts, ProcessorConfig(policy=policy), imgs, "EXP-8", why(policy))

    return stateless(test)


@clause_property("exp_tiled_policy", "EXP-9", subject=("processor",))
def exp_tiled_policy(parts: Parts) -> Runnable:
    """EXP-9: under TiledPolicy the count is InternVL's closest grid (plus thumbnail)
    times the tokens per tile."""

    def why(policy: Any) -> Any:
        def explain(image: Any) -> str:
            h, w = oracles.image_height_width(image)
            cols, rows = oracles.tiled_grid(policy, h, w)
            tiles = oracles.tiled_num_tiles(policy, h, w)
            return (f"{h}x{w}: grid {rows} rows x {cols} cols, {tiles} tiles counting the "
                    f"thumbnail, {oracles.tiled_tokens_per_tile(policy)} tokens each")
        return explain

    # Ties found by exhaustive search over small grids. 63x56 ties the 2x2 and 3x3 grids
    # with an area exactly on the 3x3 threshold (28² x 9 / 2 = 3528): the threshold is
    # strict, 2x2 stays. 2x3 ties the 1-tile and 2-tile grids (aspect 1.5): grids are
    # visited fewest tiles first, so the 1x1 grid comes first and keeps the tie.
    @example(case=(TiledPolicy(tile_size=28, patch_size=14, downsample=1, max_tiles=9),
                    [shaped_image(63, 56)]))
    @example(case=(TiledPolicy(max_tiles=3), [shaped_image(2, 3)]))
    # 30x60 (aspect 2) ties the 3x1 and 2x2 grids of 3..4 tiles (aspect 3 and 1): visited
    # fewest tiles first, 3x1 comes first and the 2x2 grid takes the tie (1800 > 1568); in
    # (cols, rows) order 2x2 would come first and 3x1 take it.
    @example(case=(TiledPolicy(tile_size=28, patch_size=14, downsample=1, min_tiles=3,
                               max_tiles=4), [shaped_image(30, 60)]))
    # The smallest valid tile: (28/14)² / 2² = 1 token per tile.
    @example(case=(TiledPolicy(tile_size=28, patch_size=14, downsample=2), [shaped_image(30, 61)]))
    @given(case=_policy_and_images(tiled_policies(), 2000))
    def test(case: tuple[Any, list[ImageInput]]) -> None:
        policy, imgs = case
        _check_policy(parts, ProcessorConfig(policy=policy), imgs, "EXP-9", why(policy))

    return stateless(test)


@clause_property("exp_rowbreak_policy", "EXP-10", subject=("processor",))
def exp_rowbreak_policy(parts: Parts) -> Runnable:
    """EXP-10: under RowBreakPolicy the range is rows of cols image tokens each ending in
    a break (the last in the end token), is_embed exactly on image tokens."""

    def why(policy: RowBreakPolicy) -> Any:
        def explain(image: Any) -> str:
            h, w = oracles.image_height_width(image)
            rows, cols = oracles.rowbreak_grid(policy, h, w)
            return f"{h}x{w}: {rows} rows of {cols} image tokens + a break"
        return explain

    # A 9x1 (1x9) image scaled by 9/4 floors its width (height) to 0 pixels: kept at 1.
    @example(case=(RowBreakPolicy(patch_size=1, max_image_size=4), [shaped_image(9, 1)]))
    @example(case=(RowBreakPolicy(patch_size=1, max_image_size=4), [shaped_image(1, 9)]))
    @given(case=_policy_and_images(rowbreak_policies(), 3500))
    def test(case: tuple[RowBreakPolicy, list[ImageInput]]) -> None:
        policy, imgs = case
        config = ProcessorConfig(policy=policy)
        out = _check_policy(parts, config, imgs, "EXP-10", why(policy))
        for i, (r, image) in enumerate(zip(out.ranges, imgs, strict=True)):
            h, w = oracles.image_height_width(image)  # type: ignore[arg-type]
            tokens, mask = oracles.rowbreak_tokens(
                policy, h, w, config.placeholder_id, config.break_id, config.end_id
            )
            got = list(out.token_ids[r.offset:r.end])
            first_diff = next((k for k, (a, b) in enumerate(zip(got, tokens, strict=False))
                               if a != b), None)
            check(got == tokens, "EXP-10",
                  f"range {i} of a {h}x{w} image must be rows of image tokens each followed "
                  f"by a break ({config.break_id}), the last by the end token "
                  f"({config.end_id}); first difference at range position {first_diff}")
            check(r.is_embed is not None and list(r.is_embed) == mask, "EXP-10",
                  f"range {i}: is_embed must be true exactly on the image tokens; "
                  f"got {describe_range(r)}")
            rows, cols = oracles.rowbreak_grid(policy, h, w)
            check(r.get_num_embeds() == rows * cols, "EXP-10",
                  f"range {i}: num_embeds must be rows*cols = {rows * cols}, "
                  f"got {r.get_num_embeds()}")

    return stateless(test)

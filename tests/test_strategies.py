"""Sanity tests of the shared strategies (properties/strategies/) and the token-count
oracles (properties/oracles.py): the strategies produce what their names promise, and
they do reach the hard cases they aim at (docs/zoo.md: what each strategy must reach)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from properties import oracles
from properties.strategies import (
    ArrayPair,
    PromptCase,
    StructurePair,
    budgets_around,
    confusable_structures,
    content_pools,
    different_options,
    equal_content_copy,
    hash_inputs,
    is_embed_masks,
    placeholder_ranges,
    positions_around_items,
    prompt_cases,
    relaid_copy,
    reordered,
    request_views,
    requests_sharing_content,
    same_bytes_different_layout,
    same_length_different_bytes,
    same_shape_different_pixels,
    shaped_image,
)
from spec.types import (
    DynamicResolutionPolicy,
    FixedPolicy,
    MultiModalItem,
    PlaceholderRange,
    RequestView,
    RowBreakPolicy,
    TiledPolicy,
)

T = TypeVar("T")
FAST = settings(derandomize=True, database=None, max_examples=60, deadline=None)
SEARCH = settings(derandomize=True, database=None, max_examples=2000, deadline=None)


def reaches(strategy: st.SearchStrategy[T], condition: Callable[[T], bool]) -> T:
    """The strategy generates a value satisfying ``condition`` (a hard case it aims at)."""
    return find(strategy, condition, settings=SEARCH)


# --- images ---------------------------------------------------------------------------


@FAST
@given(pair=same_length_different_bytes())
def test_same_length_different_bytes(pair: tuple[bytes, bytes]) -> None:
    a, b = pair
    assert len(a) == len(b) and a != b


def test_same_length_pairs_include_permutations_of_the_same_bytes() -> None:
    a, b = reaches(same_length_different_bytes(), lambda p: sorted(p[0]) == sorted(p[1]))
    assert a != b


def test_same_length_pairs_hit_the_toy_boundaries() -> None:
    reaches(same_length_different_bytes(), lambda p: len(p[0]) == 64)


@FAST
@given(pair=same_shape_different_pixels())
def test_same_shape_different_pixels(pair: tuple[Any, Any]) -> None:
    a, b = pair
    assert a.shape == b.shape and a.dtype == b.dtype and a.tobytes() != b.tobytes()


@FAST
@given(pair=same_bytes_different_layout())
def test_same_bytes_different_layout(pair: ArrayPair) -> None:
    assert pair.first.tobytes() == pair.second.tobytes()
    assert (pair.first.shape, pair.first.dtype) != (pair.second.shape, pair.second.dtype)


def test_relaid_copies_are_equal_content_in_other_layouts() -> None:
    base = np.arange(12, dtype=np.uint8).reshape(3, 4)
    copy = reaches(relaid_copy(base), lambda c: not c.flags.c_contiguous)
    assert copy is not base and copy.shape == base.shape and copy.dtype == base.dtype
    assert np.array_equal(copy, base)


@FAST
@given(data=st.data(), value=hash_inputs())
def test_equal_content_copy_is_equal_and_new(data: st.DataObject, value: Any) -> None:
    copy = data.draw(equal_content_copy(value))
    assert _same_structure(value, copy)
    if isinstance(value, (list, dict, np.ndarray)):
        assert copy is not value


def test_shaped_images_cost_one_pixel() -> None:
    image = shaped_image(4000, 3000, 3)
    assert image.shape == (4000, 3000, 3) and image.base is not None
    assert image.base.size == 1


# --- hash inputs ----------------------------------------------------------------------


def _same_structure(a: Any, b: Any) -> bool:
    """Equal type and content all the way down (arrays: dtype, shape, bytes)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return bool(a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same_structure(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_structure(a[k], b[k]) for k in a)
    return bool(a == b)


def _naive_concat(value: Any) -> bytes:
    """What an unframed serializer writes: leaves concatenated, no lengths or tags."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dict):
        return b"".join(k.encode() + _naive_concat(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return b"".join(_naive_concat(v) for v in value)
    return repr(value).encode()


@FAST
@given(pair=confusable_structures())
def test_confusable_structures_differ_but_concatenate_equal(pair: StructurePair) -> None:
    assert not _same_structure(pair.first, pair.second)
    assert _naive_concat(pair.first) == _naive_concat(pair.second), pair.why


def test_confusable_structures_include_the_spec_examples() -> None:
    reaches(
        confusable_structures(),
        lambda p: (
            isinstance(p.first, list)
            and len(p.first) == 2
            and all(isinstance(x, str) for x in p.first)
        ),
    )
    reaches(
        confusable_structures(), lambda p: isinstance(p.first, dict) and isinstance(p.second, dict)
    )
    reaches(
        confusable_structures(), lambda p: isinstance(p.first, bytes) and isinstance(p.second, str)
    )
    reaches(
        confusable_structures(),
        lambda p: isinstance(p.first, list) and isinstance(p.second, tuple) and len(p.first) == 1,
    )


@FAST
@given(options=different_options())
def test_different_options_differ(options: tuple[dict[str, Any], dict[str, Any], str]) -> None:
    first, second, _ = options
    assert first != second
    shuffled = reordered(second)
    assert shuffled == second
    if len(second) > 1:
        assert list(shuffled) != list(second)


# --- masks, ranges, requests ----------------------------------------------------------


@FAST
@given(data=st.data(), length=st.integers(1, 8))
def test_is_embed_masks(data: st.DataObject, length: int) -> None:
    mask = data.draw(is_embed_masks(length))
    assert mask is None or (len(mask) == length and any(mask))


def test_masks_reach_all_false_but_one_and_none() -> None:
    reaches(is_embed_masks(5), lambda m: m is not None and sum(m) == 1 and m[0] is False)
    reaches(is_embed_masks(5), lambda m: m is None)


def test_ranges_reach_offset_zero_single_position() -> None:
    r = reaches(placeholder_ranges(), lambda r: r.offset == 0 and r.length == 1)
    assert isinstance(r, PlaceholderRange)


@FAST
@given(requests=requests_sharing_content())
def test_requests_are_consistent(requests: tuple[RequestView, ...]) -> None:
    sizes: dict[str, int] = {}
    for request in requests:
        for item in request.items:
            assert sizes.setdefault(item.mm_hash, item.num_embeds) == item.num_embeds


def test_requests_share_content_within_and_across() -> None:
    def repeats_within(rs: tuple[RequestView, ...]) -> bool:
        return any(len({i.mm_hash for i in r.items}) < len(r.items) for r in rs)

    def shares_across(rs: tuple[RequestView, ...]) -> bool:
        hashes = [{i.mm_hash for i in r.items} for r in rs]
        return any(a & b for k, a in enumerate(hashes) for b in hashes[k + 1 :])

    reaches(requests_sharing_content(), repeats_within)
    reaches(requests_sharing_content(), shares_across)
    adjacent = reaches(
        content_pools().flatmap(lambda pool: request_views(pool, "r", 2)),
        lambda r: (
            r.items[0].mm_position.offset == 0
            and r.items[1].mm_position.offset == r.items[0].mm_position.end
        ),
    )
    assert len(adjacent.items) >= 2


@pytest.mark.parametrize("target", [0, 2, 3, 4, 6, 7, 8, 10])
def test_positions_reach_item_boundaries(target: int) -> None:
    request = RequestView("r", (MultiModalItem("A", PlaceholderRange(3, 4)),))
    reaches(positions_around_items(request, 10), lambda p: p == target)


@pytest.mark.parametrize("target", [0, 4, 5], ids=["zero", "just_below", "exact"])
def test_budgets_reach_zero_exact_and_just_below(target: int) -> None:
    reaches(budgets_around(5), lambda b: b == target)


# --- prompts ----------------------------------------------------------------------------


@FAST
@given(case=prompt_cases())
def test_prompt_cases_have_one_marker_per_image(case: PromptCase) -> None:
    config = case.config
    assert len(case.marker_positions) == len(case.images)
    reserved = config.special_ids() - {config.marker_id}
    assert not reserved & set(case.prompt)


@pytest.mark.parametrize(
    "where",
    [
        lambda c: c.marker_positions[:1] == (0,),
        lambda c: any(
            b == a + 1 for a, b in zip(c.marker_positions, c.marker_positions[1:], strict=False)
        ),
        lambda c: len(c.prompt) - 1 in c.marker_positions,
    ],
    ids=["marker_at_0", "adjacent_markers", "marker_at_end"],
)
def test_prompt_cases_reach_marker_placements(where: Callable[[PromptCase], bool]) -> None:
    reaches(prompt_cases(min_images=1), where)


# --- oracles: values known from the upstream models -----------------------------------


def test_oracle_known_values() -> None:
    assert oracles.toy_num_tokens(b"\0" * 63) == 1
    assert oracles.toy_num_tokens(b"\0" * 64) == 2
    assert oracles.fixed_num_tokens(FixedPolicy()) == 576
    qwen = DynamicResolutionPolicy()
    assert oracles.smart_resize(1, 1, 28, qwen.min_pixels, qwen.max_pixels) == (56, 56)
    assert oracles.dynamic_num_tokens(qwen, 1, 1) == 4
    # 42 / 28 = 1.5 rounds half to even: 2 * 28 = 56; 70 / 28 = 2.5 also rounds to 56
    assert oracles.smart_resize(42, 70, 28, 56 * 56, 28 * 28 * 1280) == (56, 56)
    assert oracles.dynamic_num_tokens(qwen, 4000, 4000) <= 1280
    internvl = TiledPolicy()
    assert oracles.tiled_num_tokens(internvl, 448, 448) == 256
    assert oracles.tiled_num_tokens(internvl, 448, 896) == 3 * 256  # 2 tiles + thumbnail
    # a square image ties (1,1), (2,2), (3,3): the larger wins with the area for it
    assert oracles.tiled_grid(internvl, 640, 640) == (2, 2)
    assert oracles.tiled_grid(internvl, 600, 600) == (1, 1)
    pixtral = RowBreakPolicy()
    assert oracles.rowbreak_grid(pixtral, 1024, 1024) == (64, 64)
    assert oracles.rowbreak_grid(pixtral, 17, 33) == (2, 3)
    assert oracles.rowbreak_grid(pixtral, 2048, 1000) == (64, 32)  # 1000/2 = 500 -> 32
    tokens, mask = oracles.rowbreak_tokens(RowBreakPolicy(patch_size=2), 3, 4, 9, 8, 7)
    assert tokens == [9, 9, 8, 9, 9, 7] and mask == [True, True, False, True, True, False]
    assert oracles.splice_count_message([np.zeros((3, 2)), np.zeros((2, 2))], 4) == (
        "Attempted to assign 3 + 2 = 5 multimodal tokens to 4 placeholders"
    )

"""Unit tests of the reference processor and its token-count policies (EXP-1..10)."""

from __future__ import annotations

import numpy as np
import pytest

from reference.policies import (
    find_closest_aspect_ratio,
    internvl_target_ratios,
    rowbreak_grid,
    rowbreak_tokens,
    smart_resize,
    tiled_grid,
    tiled_num_tokens,
    toy_num_tokens,
)
from reference.processor import Processor
from spec.errors import InvalidInputError, MarkerCountError
from spec.types import (
    DynamicResolutionPolicy,
    FixedPolicy,
    PlaceholderRange,
    ProcessorConfig,
    RowBreakPolicy,
    TiledPolicy,
    ToyPolicy,
)

MARKER, PH, BRK, END = 32000, 32001, 32002, 32003


def processor(policy: object = None) -> Processor:
    config = ProcessorConfig() if policy is None else ProcessorConfig(policy=policy)  # type: ignore[arg-type]
    return Processor(config)


def pixels(height: int, width: int, channels: int | None = None) -> np.ndarray:
    shape = (height, width) if channels is None else (height, width, channels)
    return np.zeros(shape, dtype=np.uint8)


# --- expansion -------------------------------------------------------------------------


def test_toy_expansion_of_two_images() -> None:
    image_a, image_b = b"a" * 100, b"b" * 200  # 100 // 64 + 1 = 2, 200 // 64 + 1 = 4
    expanded = processor().expand([1, MARKER, 2, 3, MARKER, 4], [image_a, image_b])
    assert expanded.token_ids == (1, PH, PH, 2, 3, PH, PH, PH, PH, 4)
    assert expanded.ranges == (PlaceholderRange(1, 2), PlaceholderRange(5, 4))


def test_marker_at_start_and_end_and_adjacent() -> None:
    expanded = processor(FixedPolicy(2)).expand([MARKER, MARKER, 7, MARKER], [b"x", b"y", b"z"])
    assert expanded.token_ids == (PH, PH, PH, PH, 7, PH, PH)
    assert [(r.offset, r.length) for r in expanded.ranges] == [(0, 2), (2, 2), (5, 2)]


def test_prompt_without_images_is_unchanged() -> None:
    expanded = processor().expand((5, 6, 7), [])
    assert expanded.token_ids == (5, 6, 7)
    assert expanded.ranges == ()


def test_numpy_integer_tokens_are_accepted_as_ints() -> None:
    expanded = processor().expand([np.int64(5), MARKER], [b"x"])  # type: ignore[list-item]
    assert expanded.token_ids == (5, PH)
    assert type(expanded.token_ids[0]) is int


def test_rowbreak_expansion_records_is_embed() -> None:
    # 20x40 pixels, patch 16: rows = ceil(20/16) = 2, cols = ceil(40/16) = 3.
    expanded = processor(RowBreakPolicy()).expand([9, MARKER, 9], [pixels(20, 40)])
    body = (PH, PH, PH, BRK, PH, PH, PH, END)
    assert expanded.token_ids == (9, *body, 9)
    [placeholder_range] = expanded.ranges
    assert (placeholder_range.offset, placeholder_range.length) == (1, 8)
    assert placeholder_range.is_embed == (True, True, True, False, True, True, True, False)
    assert placeholder_range.get_num_embeds() == 6


# --- policies --------------------------------------------------------------------------


def test_toy_policy_counts_bytes_and_array_nbytes() -> None:
    toy = processor(ToyPolicy())
    assert [toy.num_image_tokens(b"x" * n) for n in (1, 63, 64, 127, 128)] == [1, 1, 2, 2, 3]
    assert toy.num_image_tokens(np.zeros((4, 8), dtype=np.float32)) == 128 // 64 + 1
    assert toy_num_tokens(640) == 11


def test_fixed_policy_ignores_size() -> None:
    fixed = processor(FixedPolicy())
    assert fixed.num_image_tokens(b"x") == 576
    assert fixed.num_image_tokens(pixels(1000, 30, 3)) == 576


def test_smart_resize_known_values() -> None:
    factor, min_px, max_px = 28, 56 * 56, 28 * 28 * 1280
    assert smart_resize(224, 224, factor, min_px, max_px) == (224, 224)
    # round half to even: 42/28 = 1.5 -> 2, 70/28 = 2.5 -> 2
    assert smart_resize(42, 70, factor, min_px, max_px) == (56, 56)
    # too large: shrink with floor to fit max_pixels
    assert smart_resize(4000, 3000, factor, min_px, max_px) == (1148, 840)
    # too small (a side rounds to 0): grow with ceil to min_pixels
    assert smart_resize(10, 1000, factor, min_px, max_px) == (28, 560)
    assert smart_resize(20, 20, factor, min_px, max_px) == (56, 56)


def test_dynamic_policy_token_counts() -> None:
    dynamic = processor(DynamicResolutionPolicy())
    assert dynamic.num_image_tokens(pixels(224, 224)) == 64  # (224/28)^2
    assert dynamic.num_image_tokens(pixels(448, 448, 3)) == 256  # quadratic in the side
    assert dynamic.num_image_tokens(pixels(4000, 3000)) == (1148 // 28) * (840 // 28)
    assert dynamic.num_image_tokens(pixels(4000, 3000)) <= 1280


def test_dynamic_policy_rejects_extreme_aspect_ratio() -> None:
    with pytest.raises(InvalidInputError, match="aspect ratio"):
        processor(DynamicResolutionPolicy()).num_image_tokens(pixels(1, 201))


def test_internvl_target_ratios() -> None:
    ratios = internvl_target_ratios(1, 4)
    assert set(ratios) == {(1, 1), (1, 2), (2, 1), (1, 3), (3, 1), (2, 2), (1, 4), (4, 1)}
    assert [c * r for c, r in ratios] == sorted(c * r for c, r in ratios)
    assert internvl_target_ratios(2, 2) and all(c * r == 2 for c, r in internvl_target_ratios(2, 2))


def test_find_closest_aspect_ratio_ties_go_to_the_larger_grid_with_area() -> None:
    ratios = internvl_target_ratios(1, 12)
    # A square image ties (1,1), (2,2), (3,3): large images take the later grid...
    assert find_closest_aspect_ratio(1.0, ratios, width=1000, height=1000, tile_size=448) == (3, 3)
    # ...small ones keep the first.
    assert find_closest_aspect_ratio(1.0, ratios, width=100, height=100, tile_size=448) == (1, 1)


def test_tiled_policy_grid_and_tokens() -> None:
    policy = TiledPolicy()  # 256 tokens per tile
    assert tiled_grid(policy, 448, 896) == (1, 2)  # rows, cols: twice as wide as high
    assert tiled_num_tokens(policy, 448, 448) == 256  # one tile, no thumbnail
    assert tiled_num_tokens(policy, 448, 896) == 3 * 256  # two tiles + thumbnail
    no_thumbnail = TiledPolicy(use_thumbnail=False)
    assert tiled_num_tokens(no_thumbnail, 448, 896) == 2 * 256
    capped = TiledPolicy(max_tiles=2)
    assert tiled_grid(capped, 100, 5000) == (1, 2)  # the widest grid allowed
    assert processor(policy).num_image_tokens(pixels(448, 896, 3)) == 768


def test_rowbreak_policy_grid_and_tokens() -> None:
    policy = RowBreakPolicy()  # patch 16, max 1024
    assert rowbreak_grid(policy, 512, 512) == (32, 32)
    assert rowbreak_grid(policy, 17, 1) == (2, 1)
    assert rowbreak_grid(policy, 2048, 100) == (64, 4)  # scaled by 2: 1024 x 50
    assert rowbreak_grid(policy, 1, 5000) == (1, 64)  # height floors to 0 -> kept at 1
    tokens, is_embed = rowbreak_tokens(2, 2, PH, BRK, END)
    assert tokens == (PH, PH, BRK, PH, PH, END)
    assert is_embed == (True, True, False, True, True, False)
    assert processor(policy).num_image_tokens(pixels(512, 512)) == 32 * 33


# --- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "images"),
    [([MARKER, MARKER], [b"x"]), ([MARKER], [b"x", b"y"]), ([1, 2], [b"x"])],
)
def test_marker_count_mismatch(prompt: list[int], images: list[bytes]) -> None:
    with pytest.raises(MarkerCountError, match="markers"):
        processor().expand(prompt, images)


@pytest.mark.parametrize("special", [PH, BRK, END])
def test_special_ids_are_not_text(special: int) -> None:
    with pytest.raises(InvalidInputError, match="reserved"):
        processor().expand([1, special, MARKER], [b"x"])


@pytest.mark.parametrize(
    ("prompt", "match"),
    [
        ([1, -2], "negative"),
        ([1, True], "ints"),
        ([1, 2.0], "ints"),
        ("abc", "list or tuple"),
        (None, "list or tuple"),
    ],
)
def test_bad_prompt(prompt: object, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        processor().expand(prompt, [])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("image", "match"),
    [
        (b"", "0 bytes"),
        ("not an image", "bytes or a numpy"),
        (bytearray(b"xx"), "bytes or a numpy"),
        ([1, 2, 3], "bytes or a numpy"),
        (np.zeros((0, 4), dtype=np.uint8), "empty"),
        (np.zeros(16, dtype=np.uint8), "shape"),
        (np.zeros((2, 2, 2, 2), dtype=np.uint8), "shape"),
        (np.array([[object()]]), "dtype"),
    ],
)
def test_bad_image(image: object, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        processor().expand([MARKER], [image])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match=match):
        processor().num_image_tokens(image)  # type: ignore[arg-type]


def test_bad_image_error_names_its_index() -> None:
    with pytest.raises(InvalidInputError, match="image 1"):
        processor().expand([MARKER, MARKER], [b"ok", b""])


def test_images_must_be_a_sequence() -> None:
    with pytest.raises(InvalidInputError, match="images must be"):
        processor().expand([MARKER], b"x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "policy", [DynamicResolutionPolicy(), TiledPolicy(), RowBreakPolicy()], ids=lambda p: p.name
)
def test_pixel_policies_refuse_bytes(policy: object) -> None:
    with pytest.raises(InvalidInputError, match="needs a pixel array"):
        processor(policy).num_image_tokens(b"x" * 100)


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ("toy", "ProcessorConfig"),
        (ProcessorConfig(policy=FixedPolicy(0)), "num_tokens"),
        (ProcessorConfig(policy=DynamicResolutionPolicy(min_pixels=10, max_pixels=5)), "min_pix"),
        (ProcessorConfig(policy=TiledPolicy(min_tiles=3, max_tiles=2)), "min_tiles"),
        (ProcessorConfig(policy=TiledPolicy(tile_size=10, patch_size=14)), "0 tokens"),
        (ProcessorConfig(policy=RowBreakPolicy(patch_size=0)), "patch_size"),
        (ProcessorConfig(placeholder_id=MARKER), "distinct"),
        (ProcessorConfig(marker_id=-1), "non-negative"),
        (ProcessorConfig(policy="toy"), "policy"),  # type: ignore[arg-type]
    ],
)
def test_bad_config(config: object, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        Processor(config)  # type: ignore[arg-type]

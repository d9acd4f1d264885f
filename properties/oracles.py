"""Independent, obviously-correct arithmetic for the token-count policies (EXP-6..10) and
the splice's error message (SPL-3).

Written from the policy definitions in ``spec/types.py`` and the clauses of
``spec/SPEC.md``, never from ``reference/``: the reference is under test too, so each
rule is stated in another form than the reference's where one exists (exact integer
rounding, a closest-grid selection over the set of closest grids, an area quotient).
Where a clause fixes floating-point expressions ("rounding as upstream"), they are kept
operation by operation, because a "simplified" formula disagrees with the model's own
image processor on exactly the boundary images the strategies aim at:

* Qwen2-VL ``smart_resize`` — ``transformers/models/qwen2_vl/image_processing_qwen2_vl.py``
  (the current form: no error for sides below the factor, ``max(factor, ...)`` when
  shrinking), called by ``vllm/model_executor/models/qwen2_vl.py::_get_vision_info``.
* InternVL tiling — ``vllm/transformers_utils/processors/internvl.py``
  (``get_internvl_target_ratios``, ``find_closest_aspect_ratio``,
  ``calculate_internvl_targets``).
* Pixtral rows/cols — ``vllm/model_executor/models/pixtral.py::
  PixtralHFEncoderInfo.get_patch_grid_size``: when the image exceeds ``max_image_size``
  divide both sides by ``max(h, w) / max_image_size`` and *floor* (kept at least 1 pixel,
  where upstream would produce an empty range), then ``ceil(side / patch)``. (The
  ``mistral_common`` tokenizer path rounds instead of flooring; the two differ by one row
  or column on some scaled images. The specification follows the HF/vLLM floor.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spec.types import (
    DynamicResolutionPolicy,
    FixedPolicy,
    ImageInput,
    RowBreakPolicy,
    TiledPolicy,
    TokenCountPolicy,
    ToyPolicy,
)


def image_nbytes(image: ImageInput) -> int:
    """Size in bytes of an image: ``len`` of raw bytes, ``nbytes`` of a pixel array."""
    if isinstance(image, bytes):
        return len(image)
    return int(image.nbytes)


def image_height_width(image: NDArray[Any]) -> tuple[int, int]:
    """A pixel array is (height, width[, channels])."""
    return int(image.shape[0]), int(image.shape[1])


# --- EXP-6: toy ----------------------------------------------------------------------


def toy_num_tokens(image: ImageInput) -> int:
    """EXP-6: ``n // 64 + 1`` for an image of n bytes."""
    return image_nbytes(image) // 64 + 1


# --- EXP-7: fixed --------------------------------------------------------------------


def fixed_num_tokens(policy: FixedPolicy) -> int:
    """EXP-7: every image costs ``num_tokens``, whatever its size."""
    return policy.num_tokens


# --- EXP-8: dynamic resolution (Qwen2-VL smart_resize) ------------------------------


def _nearest_multiple(side: int, factor: int) -> int:
    """``side`` rounded to the nearest multiple of ``factor``, a half to the even one, in
    integers (EXP-8's first rounding ``round(side/f)·f``: for sides below 2**52 the float
    quotient is a half exactly when the exact one is, so the two agree)."""
    quotient, remainder = divmod(side, factor)
    if 2 * remainder > factor or (2 * remainder == factor and quotient % 2 == 1):
        quotient += 1
    return quotient * factor


def smart_resize(
    height: int, width: int, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """EXP-8's resize: each side to the nearest multiple of ``factor``; if the area then
    falls outside ``[min_pixels, max_pixels]``, both sides scaled by ``β`` and floored
    (shrinking, at least ``factor``) or ceiled (growing) to multiples of ``factor``.
    The scaling is SPEC.md's floating-point expressions operation for operation, as
    ``reference/policies.py`` has them too: reordering a float expression changes the
    result on exactly the boundary images the strategies aim at."""
    h_bar, w_bar = _nearest_multiple(height, factor), _nearest_multiple(width, factor)
    if min_pixels <= h_bar * w_bar <= max_pixels:
        return h_bar, w_bar
    if h_bar * w_bar > max_pixels:
        shrink = math.sqrt((height * width) / max_pixels)
        h_bar, w_bar = (
            max(factor, math.floor(side / shrink / factor) * factor) for side in (height, width)
        )
        return h_bar, w_bar
    grow = math.sqrt(min_pixels / (height * width))
    h_bar, w_bar = (math.ceil(side * grow / factor) * factor for side in (height, width))
    return h_bar, w_bar


def dynamic_num_tokens(policy: DynamicResolutionPolicy, height: int, width: int) -> int:
    """EXP-8: one token per merged patch of the resized image: its area over the area of
    a merged patch, ``(patch·merge)²`` (both sides are multiples of ``patch·merge``)."""
    factor = policy.patch_size * policy.merge_size
    resized = smart_resize(height, width, factor, policy.min_pixels, policy.max_pixels)
    return math.prod(resized) // factor**2


# --- EXP-9: tiled (InternVL) ---------------------------------------------------------


def tiled_target_grids(min_tiles: int, max_tiles: int) -> list[tuple[int, int]]:
    """Every ``(cols, rows)`` grid with ``min_tiles <= cols*rows <= max_tiles``, fewest
    tiles first. (Upstream sorts a set by tile count only, so grids with equal counts come
    in hash order; the chosen tile count — all the token count depends on — is the same
    for any order, so ties within a count are ordered by (cols, rows) here.)"""
    grids = {
        (i, j)
        for i in range(1, max_tiles + 1)
        for j in range(1, max_tiles + 1)
        if min_tiles <= i * j <= max_tiles
    }
    return sorted(grids, key=lambda g: (g[0] * g[1], g))


def tiled_grid(policy: TiledPolicy, height: int, width: int) -> tuple[int, int]:
    """EXP-9: ``(cols, rows)`` whose aspect ratio ``cols/rows`` is closest to
    ``width/height``. Of the grids at that closest distance, the first visited is kept
    unless a later one has less than twice the image's area
    (``w·h > ½·tile²·cols·rows``): then the last such one. (The clause's running
    replacement, stated over the set of closest grids instead of as a loop.)"""
    aspect_ratio = width / height
    grids = tiled_target_grids(policy.min_tiles, policy.max_tiles)
    distance = {grid: abs(aspect_ratio - grid[0] / grid[1]) for grid in grids}
    closest = min(distance.values())
    first, *later = [grid for grid in grids if distance[grid] == closest]
    half_tile_area = 0.5 * policy.tile_size * policy.tile_size
    replacing = [g for g in later if width * height > half_tile_area * g[0] * g[1]]
    return replacing[-1] if replacing else first


def tiled_tokens_per_tile(policy: TiledPolicy) -> int:
    """Tokens of one tile after pixel-shuffle downsampling."""
    return (policy.tile_size // policy.patch_size) ** 2 // policy.downsample**2


def tiled_num_tiles(policy: TiledPolicy, height: int, width: int) -> int:
    """Grid tiles plus one thumbnail when the grid has more than one tile."""
    cols, rows = tiled_grid(policy, height, width)
    tiles = cols * rows
    if policy.use_thumbnail and tiles != 1:
        tiles += 1
    return tiles


def tiled_num_tokens(policy: TiledPolicy, height: int, width: int) -> int:
    """EXP-9: ``(tiles + thumbnail) * tokens_per_tile``."""
    return tiled_num_tiles(policy, height, width) * tiled_tokens_per_tile(policy)


# --- EXP-10: row breaks (Pixtral) ----------------------------------------------------


def rowbreak_grid(policy: RowBreakPolicy, height: int, width: int) -> tuple[int, int]:
    """EXP-10: ``(rows, cols)`` of patches of the image scaled down to fit
    ``max_image_size``."""
    h, w = height, width
    ratio = max(height / policy.max_image_size, width / policy.max_image_size)
    if ratio > 1:
        h = max(math.floor(height / ratio), 1)
        w = max(math.floor(width / ratio), 1)
    rows = -(-h // policy.patch_size)
    cols = -(-w // policy.patch_size)
    return rows, cols


def rowbreak_tokens(
    policy: RowBreakPolicy,
    height: int,
    width: int,
    image_id: int,
    break_id: int,
    end_id: int,
) -> tuple[list[int], list[bool]]:
    """EXP-10: the range's token ids and its ``is_embed`` mask: per row ``cols`` image
    tokens then a break, the last break replaced by the end token."""
    rows, cols = rowbreak_grid(policy, height, width)
    tokens: list[int] = []
    mask: list[bool] = []
    for _ in range(rows):
        tokens.extend([image_id] * cols + [break_id])
        mask.extend([True] * cols + [False])
    tokens[-1] = end_id
    return tokens, mask


def rowbreak_num_tokens(policy: RowBreakPolicy, height: int, width: int) -> int:
    rows, cols = rowbreak_grid(policy, height, width)
    return rows * (cols + 1)


# --- dispatch ------------------------------------------------------------------------


def policy_num_tokens(policy: TokenCountPolicy, image: ImageInput) -> int:
    """The placeholder length ``image`` must get under ``policy`` (EXP-5..10)."""
    if isinstance(policy, ToyPolicy):
        return toy_num_tokens(image)
    if isinstance(policy, FixedPolicy):
        return fixed_num_tokens(policy)
    if isinstance(image, bytes):
        raise TypeError(f"policy {policy.name} needs a pixel array")
    height, width = image_height_width(image)
    if isinstance(policy, DynamicResolutionPolicy):
        return dynamic_num_tokens(policy, height, width)
    if isinstance(policy, TiledPolicy):
        return tiled_num_tokens(policy, height, width)
    return rowbreak_num_tokens(policy, height, width)


def policy_num_embeds(policy: TokenCountPolicy, image: ImageInput) -> int:
    """How many positions of the range take an embedding (EXP-5, EXP-10)."""
    if isinstance(policy, RowBreakPolicy):
        assert not isinstance(image, bytes)
        rows, cols = rowbreak_grid(policy, *image_height_width(image))
        return rows * cols
    return policy_num_tokens(policy, image)


# --- SPL-3 ---------------------------------------------------------------------------


def splice_count_message(mm_embeds: Sequence[NDArray[Any]], num_placeholders: int) -> str:
    """SPL-3: the upstream message, ``<expr>`` the per-item row counts joined by ``+``."""
    counts = [int(e.shape[0]) for e in mm_embeds]
    expr = " + ".join(str(c) for c in counts)
    return (
        f"Attempted to assign {expr} = {sum(counts)} multimodal tokens "
        f"to {num_placeholders} placeholders"
    )


def expected_merge(
    inputs_embeds: NDArray[Any], mm_embeds: Sequence[NDArray[Any]], is_multimodal: NDArray[Any]
) -> NDArray[Any]:
    """SPL-1/2: the masked rows, in position order, replaced by the concatenated
    embeddings cast to the input's dtype; every other row unchanged."""
    out = inputs_embeds.copy()
    positions = np.flatnonzero(is_multimodal)
    row = 0
    for emb in mm_embeds:
        for r in range(emb.shape[0]):
            out[positions[row]] = emb[r].astype(inputs_embeds.dtype)
            row += 1
    return out

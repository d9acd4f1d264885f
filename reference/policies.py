"""Token-count policies: how many placeholder tokens an image becomes (EXP-6..10).

Pure functions of the policy and the image's size, exposed so that tests (and
CrossHair) can call the arithmetic directly. The processor (``reference.processor``)
only dispatches to :func:`image_token_ids`.

Images are raw bytes (the mini-build's fake images) or pixel arrays of shape
``(height, width)`` or ``(height, width, channels)``. Only the toy and fixed policies
accept bytes: the others need a height and a width.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spec.errors import InvalidInputError
from spec.types import (
    DynamicResolutionPolicy,
    FixedPolicy,
    ImageInput,
    RowBreakPolicy,
    TiledPolicy,
    TokenCountPolicy,
    ToyPolicy,
)

#: numpy dtype kinds an image array may have: bool, signed, unsigned, float.
_PIXEL_KINDS = frozenset("biuf")

#: Qwen2-VL refuses images more elongated than this (``smart_resize``).
MAX_ASPECT_RATIO = 200


# --- images ----------------------------------------------------------------------------


def check_image(image: object) -> ImageInput:
    """Return ``image`` if it is a non-empty ``bytes`` or a non-empty numeric pixel
    array of shape ``(h, w)`` or ``(h, w, c)``; otherwise raise ``InvalidInputError``
    naming the problem (EXP-4, ENC-1)."""
    if isinstance(image, bytes):
        if len(image) == 0:
            raise InvalidInputError("image is 0 bytes long; an image must have content")
        return image
    if isinstance(image, np.ndarray):
        array: NDArray[Any] = image
        if array.ndim not in (2, 3):
            raise InvalidInputError(
                f"image array must have shape (h, w) or (h, w, c), got shape {array.shape}"
            )
        if array.size == 0:
            raise InvalidInputError(f"image array is empty (shape {array.shape})")
        if array.dtype.kind not in _PIXEL_KINDS:
            raise InvalidInputError(f"image array has non-numeric dtype {array.dtype}")
        return array
    raise InvalidInputError(
        f"image must be bytes or a numpy pixel array, got {type(image).__name__}"
    )


def image_num_bytes(image: ImageInput) -> int:
    """Size of the image's content in bytes (arrays: ``nbytes``)."""
    return len(image) if isinstance(image, bytes) else int(image.nbytes)


def image_height_width(image: ImageInput, policy_name: str) -> tuple[int, int]:
    """``(height, width)`` of a pixel array; bytes have no size, so a policy that needs
    one raises ``InvalidInputError``."""
    if isinstance(image, bytes):
        raise InvalidInputError(f"policy {policy_name} needs a pixel array, got bytes")
    return int(image.shape[0]), int(image.shape[1])


# --- EXP-6: toy ------------------------------------------------------------------------


def toy_num_tokens(num_bytes: int) -> int:
    """The mini-build's rule (seed 000): ``num_bytes // 64 + 1``."""
    if num_bytes < 1:
        raise InvalidInputError(f"image size must be >= 1 byte, got {num_bytes}")
    return num_bytes // 64 + 1


# --- EXP-8: dynamic resolution (Qwen2-VL) ---------------------------------------------


def smart_resize(
    height: int, width: int, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """Qwen2-VL's ``smart_resize`` (transformers' ``image_processing_qwen2_vl``, copied
    in vLLM as ``hunyuan_vl_image.smart_resize``), rounding included: Python's
    ``round`` (half to even) first, then floor when shrinking to ``max_pixels`` and
    ceil when growing to ``min_pixels``. Both sides come out as positive multiples of
    ``factor``. An aspect ratio above 200 is refused, as upstream does."""
    if height < 1 or width < 1:
        raise InvalidInputError(f"image must be at least 1x1 pixels, got {height}x{width}")
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise InvalidInputError(
            f"absolute aspect ratio must be at most {MAX_ASPECT_RATIO}, got "
            f"{max(height, width) / min(height, width)} for a {height}x{width} image"
        )
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        # Also reached when a side rounded to 0: the ceil below makes it >= factor.
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def dynamic_num_tokens(policy: DynamicResolutionPolicy, height: int, width: int) -> int:
    """One token per merged patch of the resized image:
    ``(h' / (patch·merge)) · (w' / (patch·merge))`` (EXP-8)."""
    factor = policy.patch_size * policy.merge_size
    h_bar, w_bar = smart_resize(height, width, factor, policy.min_pixels, policy.max_pixels)
    return (h_bar // factor) * (w_bar // factor)


# --- EXP-9: tiled (InternVL) -----------------------------------------------------------


def internvl_target_ratios(min_num: int, max_num: int) -> list[tuple[int, int]]:
    """Candidate grids ``(cols, rows)`` with ``min_num <= cols·rows <= max_num``,
    sorted by tile count. Built exactly as vLLM's ``get_internvl_target_ratios`` (a set
    sorted by product), so grids with equal tile counts come in the same order as
    upstream's and ties break the same way."""
    target_ratios = {
        (i, j)
        for n in range(min_num, max_num + 1)
        for i in range(1, n + 1)
        for j in range(1, n + 1)
        if min_num <= i * j <= max_num
    }
    return sorted(target_ratios, key=lambda ratio: ratio[0] * ratio[1])


def find_closest_aspect_ratio(
    aspect_ratio: float,
    target_ratios: list[tuple[int, int]],
    width: int,
    height: int,
    tile_size: int,
) -> tuple[int, int]:
    """vLLM's ``find_closest_aspect_ratio``: the ``(cols, rows)`` whose ``cols/rows`` is
    nearest ``width/height``; on an exact tie the later (larger) grid wins when the
    image has more than half its area (``area > 0.5·tile²·cols·rows``)."""
    best_ratio_diff = float("inf")
    best_ratio = (1, 1)
    area = width * height
    for ratio in target_ratios:
        ratio_diff = abs(aspect_ratio - ratio[0] / ratio[1])
        if ratio_diff < best_ratio_diff:
            best_ratio_diff = ratio_diff
            best_ratio = ratio
        elif (
            ratio_diff == best_ratio_diff
            and area > 0.5 * tile_size * tile_size * ratio[0] * ratio[1]
        ):
            best_ratio = ratio
    return best_ratio


def tiled_grid(policy: TiledPolicy, height: int, width: int) -> tuple[int, int]:
    """The ``(rows, cols)`` tile grid InternVL picks for a ``height × width`` image."""
    ratios = internvl_target_ratios(policy.min_tiles, policy.max_tiles)
    cols, rows = find_closest_aspect_ratio(
        width / height, ratios, width=width, height=height, tile_size=policy.tile_size
    )
    return rows, cols


def tokens_per_tile(policy: TiledPolicy) -> int:
    """``(tile / patch)² / downsample²``: InternVL's ``image_seq_length``."""
    return (policy.tile_size // policy.patch_size) ** 2 // policy.downsample**2


def tiled_num_tokens(policy: TiledPolicy, height: int, width: int) -> int:
    """``(tiles + thumbnail) · tokens_per_tile`` with one thumbnail tile when the grid
    has more than one tile and the policy uses thumbnails (EXP-9)."""
    rows, cols = tiled_grid(policy, height, width)
    tiles = rows * cols
    if policy.use_thumbnail and tiles > 1:
        tiles += 1
    return tiles * tokens_per_tile(policy)


# --- EXP-10: row breaks (Pixtral) ------------------------------------------------------


def rowbreak_grid(policy: RowBreakPolicy, height: int, width: int) -> tuple[int, int]:
    """``(rows, cols)`` of patches after scaling the image down to fit
    ``max_image_size`` (vLLM ``PixtralHFEncoderInfo.get_patch_grid_size``: divide both
    sides by ``max(h, w) / max_image_size`` when above 1, flooring), then
    ``rows = ⌈h/patch⌉``, ``cols = ⌈w/patch⌉``. A side that floors to 0 pixels (a very
    elongated image) is kept at 1 pixel: upstream would produce an empty range."""
    ratio = max(width / policy.max_image_size, height / policy.max_image_size)
    if ratio > 1:
        width = max(1, math.floor(width / ratio))
        height = max(1, math.floor(height / ratio))
    return math.ceil(height / policy.patch_size), math.ceil(width / policy.patch_size)


def rowbreak_tokens(
    rows: int, cols: int, placeholder_id: int, break_id: int, end_id: int
) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    """``([placeholder]·cols + [break])·rows`` with the last break replaced by the end
    token, and the ``is_embed`` mask that is true exactly on the placeholders."""
    tokens: list[int] = ([placeholder_id] * cols + [break_id]) * rows
    tokens[-1] = end_id
    return tuple(tokens), tuple(token == placeholder_id for token in tokens)


# --- dispatch ------------------------------------------------------------------------


def validate_policy(policy: object) -> TokenCountPolicy:
    """Reject a policy whose parameters would give zero or negative token counts."""

    def positive(name: str, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInputError(f"{name} must be a positive int, got {value!r}")

    if isinstance(policy, ToyPolicy):
        return policy
    if isinstance(policy, FixedPolicy):
        positive("FixedPolicy.num_tokens", policy.num_tokens)
        return policy
    if isinstance(policy, DynamicResolutionPolicy):
        for name in ("patch_size", "merge_size", "min_pixels", "max_pixels"):
            positive(f"DynamicResolutionPolicy.{name}", getattr(policy, name))
        if policy.min_pixels > policy.max_pixels:
            raise InvalidInputError(
                f"DynamicResolutionPolicy.min_pixels ({policy.min_pixels}) exceeds "
                f"max_pixels ({policy.max_pixels})"
            )
        return policy
    if isinstance(policy, TiledPolicy):
        for name in ("tile_size", "patch_size", "downsample", "min_tiles", "max_tiles"):
            positive(f"TiledPolicy.{name}", getattr(policy, name))
        if policy.min_tiles > policy.max_tiles:
            raise InvalidInputError(
                f"TiledPolicy.min_tiles ({policy.min_tiles}) exceeds max_tiles ({policy.max_tiles})"
            )
        if tokens_per_tile(policy) < 1:
            raise InvalidInputError(
                f"TiledPolicy gives 0 tokens per tile (tile {policy.tile_size}, "
                f"patch {policy.patch_size}, downsample {policy.downsample})"
            )
        return policy
    if isinstance(policy, RowBreakPolicy):
        positive("RowBreakPolicy.patch_size", policy.patch_size)
        positive("RowBreakPolicy.max_image_size", policy.max_image_size)
        return policy
    raise InvalidInputError(f"unknown token-count policy {type(policy).__name__}")


def image_token_ids(
    policy: TokenCountPolicy,
    image: ImageInput,
    placeholder_id: int,
    break_id: int,
    end_id: int,
) -> tuple[tuple[int, ...], tuple[bool, ...] | None]:
    """The tokens that replace the image's marker and their ``is_embed`` mask (``None``
    when every position takes an embedding). ``image`` must have passed
    :func:`check_image`."""
    if isinstance(policy, ToyPolicy):
        return (placeholder_id,) * toy_num_tokens(image_num_bytes(image)), None
    if isinstance(policy, FixedPolicy):
        return (placeholder_id,) * policy.num_tokens, None
    height, width = image_height_width(image, policy.name)
    if isinstance(policy, DynamicResolutionPolicy):
        return (placeholder_id,) * dynamic_num_tokens(policy, height, width), None
    if isinstance(policy, TiledPolicy):
        return (placeholder_id,) * tiled_num_tokens(policy, height, width), None
    rows, cols = rowbreak_grid(policy, height, width)
    return rowbreak_tokens(rows, cols, placeholder_id, break_id, end_id)

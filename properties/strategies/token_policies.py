"""Token-count policies (EXP): fixed, Qwen2-VL-like dynamic resolution, InternVL-like
tiling and Pixtral-like row breaks, with image sides aimed at each policy's rounding
ties and boundaries."""

from __future__ import annotations

import functools

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from properties.strategies.image_data import images, shaped_images
from spec.types import (
    DynamicResolutionPolicy,
    FixedPolicy,
    ImageInput,
    RowBreakPolicy,
    TiledPolicy,
    TokenCountPolicy,
    ToyPolicy,
)


@functools.cache
def fixed_policies(max_tokens: int = 600) -> SearchStrategy[FixedPolicy]:
    counts = st.sampled_from([1, 576] if max_tokens >= 576 else [1]) | st.integers(1, max_tokens)
    return st.builds(FixedPolicy, num_tokens=counts)


@functools.cache
@st.composite
def dynamic_policies(draw: st.DrawFn, small: bool = False) -> DynamicResolutionPolicy:
    """Qwen2-VL-like settings; ``small`` keeps the token count at most ~25."""
    if not small and draw(st.booleans()):
        return DynamicResolutionPolicy()
    patch = draw(st.sampled_from([2, 14]) | st.integers(1, 16)) if not small else draw(
        st.integers(1, 4)
    )
    merge = draw(st.sampled_from([1, 2]))
    factor = patch * merge
    # bounds in merged patches, on and just off a whole number of them
    min_cells = draw(st.integers(1, 4))
    max_cells = draw(st.integers(min_cells, 25 if small else 400))
    min_pixels = draw(st.sampled_from([min_cells * factor * factor,
                                       min_cells * factor * factor + 1]))
    max_pixels = draw(st.sampled_from([max_cells * factor * factor,
                                       max_cells * factor * factor - 1]))
    return DynamicResolutionPolicy(patch_size=patch, merge_size=merge,
                                   min_pixels=min_pixels, max_pixels=max(max_pixels, min_pixels))


@functools.cache
@st.composite
def tiled_policies(draw: st.DrawFn, small: bool = False) -> TiledPolicy:
    """InternVL-like settings; ``small`` uses 4-pixel tiles of 4 tokens."""
    if not small and draw(st.booleans()):
        return TiledPolicy(max_tiles=draw(st.sampled_from([6, 12])))
    min_tiles = draw(st.integers(1, 2))
    max_tiles = draw(st.integers(min_tiles, 6 if small else 12))
    if small:
        tile, patch, down = 4, 2, 1
    else:
        tile, patch, down = draw(st.sampled_from([(448, 14, 2), (28, 14, 1), (32, 4, 2)]))
    return TiledPolicy(tile_size=tile, patch_size=patch, downsample=down,
                       min_tiles=min_tiles, max_tiles=max_tiles,
                       use_thumbnail=draw(st.booleans()))


@functools.cache
@st.composite
def rowbreak_policies(draw: st.DrawFn, small: bool = False) -> RowBreakPolicy:
    """Pixtral-like settings; ``small`` keeps at most 4x4 patches."""
    if small:
        patch = draw(st.sampled_from([1, 2, 4]))
        return RowBreakPolicy(patch_size=patch, max_image_size=4 * patch)
    if draw(st.booleans()):
        return RowBreakPolicy()
    patch = draw(st.sampled_from([14, 16]) | st.integers(1, 32))
    return RowBreakPolicy(patch_size=patch, max_image_size=patch * draw(st.integers(1, 16)))


@functools.cache
def dynamic_sides(policy: DynamicResolutionPolicy, max_side: int) -> SearchStrategy[int]:
    """Sides on ``smart_resize``'s rounding ties ((k + 1/2) * factor rounds to even) and
    boundaries (multiples of the factor, one below, one above)."""
    factor = policy.patch_size * policy.merge_size
    aimed = sorted({s for k in range(0, 6) for s in (k * factor + factor // 2, k * factor,
                                                      k * factor - 1, k * factor + 1)
                    if 1 <= s <= max_side})
    return st.sampled_from(aimed) | st.integers(1, max_side)


@functools.cache
def tiled_sides(policy: TiledPolicy, max_side: int) -> SearchStrategy[int]:
    """Sides that are whole tiles (exact aspect-ratio ties) or on the area threshold
    ``area > tile² * grid / 2`` of the tie rule."""
    t = policy.tile_size
    aimed = sorted({s for k in range(1, 5) for s in (k * t, k * t - 1, k * t + 1,
                                                      round(k * t * 0.7071), k * t // 2)
                    if 1 <= s <= max_side})
    return st.sampled_from(aimed) | st.integers(1, max_side)


@functools.cache
def rowbreak_sides(policy: RowBreakPolicy, max_side: int) -> SearchStrategy[int]:
    """Sides on patch multiples (ceil vs floor differ just above them) and around
    ``max_image_size`` (scaling kicks in just above it)."""
    p, m = policy.patch_size, policy.max_image_size
    aimed = sorted({s for s in (1, p - 1, p, p + 1, 2 * p + 1, m - 1, m, m + 1, 2 * m + 1,
                                3 * m)
                    if 1 <= s <= max_side})
    return st.sampled_from(aimed) | st.integers(1, max_side)


@functools.cache
@st.composite
def images_for_policy(
    draw: st.DrawFn, policy: TokenCountPolicy, max_side: int = 64, max_bytes: int = 300
) -> ImageInput:
    """An image the policy accepts, aimed at its boundaries."""
    if isinstance(policy, (ToyPolicy, FixedPolicy)):
        return draw(images(max_bytes))
    if isinstance(policy, DynamicResolutionPolicy):
        return draw(shaped_images(sides=dynamic_sides(policy, max_side), max_aspect=100))
    if isinstance(policy, TiledPolicy):
        return draw(shaped_images(sides=tiled_sides(policy, max_side)))
    return draw(shaped_images(sides=rowbreak_sides(policy, max_side)))



@functools.cache
def small_policies() -> SearchStrategy[TokenCountPolicy]:
    """Every policy kind with settings that keep each range to a few dozen tokens."""
    return st.one_of(
        st.just(ToyPolicy()),
        fixed_policies(8),
        dynamic_policies(small=True),
        tiled_policies(small=True),
        rowbreak_policies(small=True),
    )

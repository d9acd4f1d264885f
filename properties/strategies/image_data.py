"""Images and pixel arrays (HASH, ENC, EXP, DIFF): raw encoded-image bytes biased to the
toy policy's 64-byte boundaries, pairs of the same length with different bytes, small
real pixel arrays, shape-only broadcast views for the size policies, and the same array
content in a new object and memory layout."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy
from numpy.typing import NDArray

from spec.types import ImageInput

# --- describing values in the spec's vocabulary (for note()) --------------------------


def describe_image(image: object) -> str:
    """A short description of an image for counterexample narration."""
    if isinstance(image, bytes):
        head = image[:6].hex()
        return f"{len(image)}-byte image ({head}{'...' if len(image) > 6 else ''})"
    if isinstance(image, np.ndarray):
        dims = "x".join(str(d) for d in image.shape)
        if 0 in image.strides and image.size > 1:
            layout = " (shape only: a broadcast view)"
        elif not image.flags.c_contiguous:
            layout = ", non-contiguous"
        else:
            layout = ""
        return f"{dims} {image.dtype} pixel array{layout}"
    return f"{type(image).__name__} {image!r}"



# --- raw images (bytes) ------------------------------------------------------------------

#: Byte sizes on and around the toy policy's 64-byte steps (EXP-6).
TOY_BOUNDARY_SIZES = (1, 2, 63, 64, 65, 127, 128, 129, 191, 192, 193, 255, 256)


@functools.cache
def byte_sizes(min_size: int = 1, max_size: int = 300) -> SearchStrategy[int]:
    """Sizes biased to the 64-byte boundaries of the toy policy."""
    boundary = [s for s in TOY_BOUNDARY_SIZES if min_size <= s <= max_size]
    ranged = st.integers(min_size, max_size)
    return st.one_of(st.sampled_from(boundary), ranged) if boundary else ranged


@functools.cache
@st.composite
def raw_images(draw: st.DrawFn, min_size: int = 1, max_size: int = 300) -> bytes:
    """Encoded-image stand-ins: bytes of a size biased to the policy boundaries."""
    size = draw(byte_sizes(min_size, max_size))
    return draw(st.binary(min_size=size, max_size=size))


@functools.cache
@st.composite
def same_length_different_bytes(
    draw: st.DrawFn, min_size: int = 1, max_size: int = 256
) -> tuple[bytes, bytes]:
    """Two byte strings of equal length and different content (HASH-2, ENC-2): one byte
    changed (first, last or any), two bytes swapped (same multiset of bytes, so a hash
    of the sum or the sorted bytes collides), or unrelated content."""
    size = draw(byte_sizes(min_size, max_size))
    data = bytearray(draw(st.binary(min_size=size, max_size=size)))
    mode = draw(st.sampled_from(["flip", "swap", "fresh"] if size >= 2 else ["flip", "fresh"]))
    if mode == "swap":
        i = draw(st.sampled_from([0, size - 1]) | st.integers(0, size - 1))
        j = draw(st.integers(0, size - 1).filter(lambda k: k != i))
        if data[i] == data[j]:
            data[j] = (data[j] + 1) % 256
        other = bytearray(data)
        other[i], other[j] = data[j], data[i]
    elif mode == "flip":
        pos = draw(st.sampled_from([0, size - 1]) | st.integers(0, size - 1))
        other = bytearray(data)
        other[pos] = (data[pos] + draw(st.integers(1, 255))) % 256
    else:
        other = bytearray(draw(st.binary(min_size=size, max_size=size)))
        if other == data:
            other[0] = (other[0] + 1) % 256
    assert bytes(data) != bytes(other) and len(data) == len(other)
    return bytes(data), bytes(other)


# --- pixel arrays ----------------------------------------------------------------------

#: dtypes a pixel array may have; uint8 is what images are.
PIXEL_DTYPES: tuple[type[np.generic], ...] = (np.uint8, np.uint16, np.float32)


@functools.cache
@st.composite
def array_shapes(
    draw: st.DrawFn, min_side: int = 1, max_side: int = 8, channels: bool = True
) -> tuple[int, ...]:
    """(height, width) or (height, width, channels) with channels 1 or 3."""
    h = draw(st.integers(min_side, max_side))
    w = draw(st.integers(min_side, max_side))
    if channels and draw(st.booleans()):
        return (h, w, draw(st.sampled_from([1, 3])))
    return (h, w)


def array_from_bytes(data: bytes, shape: Sequence[int], dtype: Any) -> NDArray[Any]:
    """A fresh writable C-contiguous array with exactly ``data`` as its buffer."""
    return np.frombuffer(data, dtype=dtype).reshape(tuple(shape)).copy()


@functools.cache
@st.composite
def pixel_arrays(
    draw: st.DrawFn,
    min_side: int = 1,
    max_side: int = 8,
    dtypes: Sequence[type[np.generic]] = (np.uint8,),
    channels: bool = True,
) -> NDArray[Any]:
    """Small real pixel arrays (H, W[, C]) with drawn content (a few hundred bytes)."""
    shape = draw(array_shapes(min_side, max_side, channels))
    dtype = np.dtype(draw(st.sampled_from(list(dtypes))))
    count = int(np.prod(shape))
    if dtype.kind == "f":
        # finite floats only (one drawn byte per pixel): NaN != NaN would make "equal
        # content" ambiguous
        data = draw(st.binary(min_size=count, max_size=count))
        scaled: NDArray[Any] = np.frombuffer(data, dtype=np.uint8).astype(dtype) / 255
        return scaled.reshape(shape).astype(dtype)
    nbytes = count * dtype.itemsize
    data = draw(st.binary(min_size=nbytes, max_size=nbytes))
    return array_from_bytes(data, shape, dtype)


@functools.cache
@st.composite
def same_shape_different_pixels(
    draw: st.DrawFn, max_side: int = 8
) -> tuple[NDArray[Any], NDArray[Any]]:
    """Two uint8 arrays of the same shape and dtype whose data differ (HASH-2, ENC-2)."""
    shape = draw(array_shapes(1, max_side))
    nbytes = int(np.prod(shape))
    a, b = draw(same_length_different_bytes(nbytes, nbytes))
    return array_from_bytes(a, shape, np.uint8), array_from_bytes(b, shape, np.uint8)


def shaped_image(height: int, width: int, channels: int | None = None) -> NDArray[Any]:
    """A read-only (height, width[, channels]) uint8 image that allocates one pixel: the
    size policies read only the shape, so big images cost nothing (a broadcast view)."""
    shape = (height, width) if channels is None else (height, width, channels)
    return np.broadcast_to(np.zeros((1,) * len(shape), dtype=np.uint8), shape)


@functools.cache
@st.composite
def shaped_images(
    draw: st.DrawFn,
    min_side: int = 1,
    max_side: int = 64,
    sides: SearchStrategy[int] | None = None,
    max_aspect: float | None = None,
) -> NDArray[Any]:
    """Images whose shape matters and content does not (dynamic, tiled, row-break
    policies); sides from ``sides`` when given, else uniform in range."""
    side = sides if sides is not None else st.integers(min_side, max_side)
    h = draw(side)
    w = draw(side)
    if max_aspect is not None:
        # clamp the aspect ratio: beyond it upstream processors refuse the image
        lo = max(1, -(-h // int(max_aspect)))
        w = min(max(w, lo), int(h * max_aspect))
    channels = draw(st.sampled_from([None, 3]))
    return shaped_image(h, w, channels)


@functools.cache
@st.composite
def images(draw: st.DrawFn, max_bytes: int = 300, max_side: int = 8) -> ImageInput:
    """Any image the toy policy accepts: raw bytes or a small pixel array."""
    if draw(st.booleans()):
        return draw(raw_images(1, max_bytes))
    return draw(pixel_arrays(1, max_side))


@st.composite
def relaid_copy(draw: st.DrawFn, array: NDArray[Any]) -> NDArray[Any]:
    """The same array content (dtype, shape, values) in a new object and, often, a new
    memory layout: a C copy, a Fortran-order copy, or a strided view into a larger
    buffer (HASH-1, ENC-2: content, not layout or identity)."""
    kind = draw(st.sampled_from(["c", "fortran", "strided"]))
    if kind == "fortran":
        return np.asfortranarray(array.copy())
    if kind == "strided" and array.ndim >= 1 and array.size > 0:
        bigger = np.zeros((array.shape[0] * 2,) + array.shape[1:], dtype=array.dtype)
        bigger[::2] = array
        return bigger[::2]
    return array.copy()

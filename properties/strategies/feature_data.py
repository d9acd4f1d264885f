"""Processed features (HASH-9, HASH-10): an item's processor output, one array or a list
of arrays, as an engine that keys items by it hashes them (SGLang's ``hash_feature``).

The pairs aim at what a hash of the bytes alone confuses: one byte payload *framed* two
ways — another shape, another dtype of the same bytes, a list split at other places —
and, for contrast, one framing with a byte changed. Payloads are a few dozen bytes: the
confusions need no more, and every dtype here (all of them torch's too, so an engine that
hashes tensors can be handed the same feature) divides their length.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from numpy.typing import NDArray

from properties.strategies.image_data import array_from_bytes
from spec.types import ProcessedFeature

#: Dtypes of processor outputs (pixel values, grids, masks), each a torch dtype too.
FEATURE_DTYPES: tuple[str, ...] = ("float32", "float16", "int32", "int16", "uint8")

#: Payloads are a multiple of this many bytes (the widest dtype's itemsize).
_WORD = 4


@dataclass(frozen=True)
class FeaturePair:
    """Two processed features that differ (``why`` says how)."""

    first: ProcessedFeature
    second: ProcessedFeature
    why: str


def describe_feature(feature: ProcessedFeature) -> str:
    """``float32 (6, 4)``, or ``[uint8 (2,), uint8 (2, 3)]`` for a list."""
    if isinstance(feature, np.ndarray):
        return f"{feature.dtype} {tuple(feature.shape)}"
    return "[" + ", ".join(describe_feature(array) for array in feature) + "]"


def same_feature(first: ProcessedFeature, second: ProcessedFeature) -> bool | None:
    """Whether two features are equal (dtype, shape and bytes of each array, a list's
    arrays in order); ``None`` for an array against a list, which neither clause
    compares (SPEC.md HASH-9)."""
    if isinstance(first, np.ndarray) and isinstance(second, np.ndarray):
        return (
            first.dtype == second.dtype
            and first.shape == second.shape
            and np.ascontiguousarray(first).tobytes() == np.ascontiguousarray(second).tobytes()
        )
    if isinstance(first, np.ndarray) or isinstance(second, np.ndarray):
        return None
    return len(first) == len(second) and all(
        same_feature(a, b) is True for a, b in zip(first, second, strict=True)
    )


def _shape_of(draw: st.DrawFn, count: int) -> tuple[int, ...]:
    """A shape of ``count`` elements: flat, or two or three axes on its divisors."""
    divisors = [d for d in range(1, count + 1) if count % d == 0]
    rows = draw(st.sampled_from(divisors), label="rows")
    if draw(st.booleans(), label="flat"):
        return (count,)
    rest = count // rows
    if draw(st.booleans(), label="third axis"):
        inner = draw(st.sampled_from([d for d in divisors if rest % d == 0]), label="depth")
        return (rows, rest // inner, inner)
    return (rows, rest)


@dataclass(frozen=True)
class _Framing:
    """How a payload becomes a feature: its dtype, and the shape of each array (one
    array, or a list of them when ``as_list``)."""

    dtype: str
    shapes: tuple[tuple[int, ...], ...]
    as_list: bool

    def apply(self, payload: bytes) -> ProcessedFeature:
        itemsize = np.dtype(self.dtype).itemsize
        arrays, start = [], 0
        for shape in self.shapes:
            end = start + int(np.prod(shape)) * itemsize
            arrays.append(array_from_bytes(payload[start:end], shape, self.dtype))
            start = end
        return arrays if self.as_list else arrays[0]


def _framing(draw: st.DrawFn, nbytes: int) -> _Framing:
    """One array of ``nbytes``, or a list of arrays cut at drawn places."""
    dtype = draw(st.sampled_from(FEATURE_DTYPES), label="dtype")
    count = nbytes // np.dtype(dtype).itemsize
    if not draw(st.booleans(), label="a list"):
        return _Framing(dtype, (_shape_of(draw, count),), as_list=False)
    cuts = (
        draw(st.lists(st.integers(1, count - 1), max_size=3, unique=True), label="cuts")
        if count > 1 else []
    )
    bounds = [0, *sorted(cuts), count]
    shapes = tuple(
        _shape_of(draw, end - start) for start, end in zip(bounds, bounds[1:], strict=False)
    )
    return _Framing(dtype, shapes, as_list=True)


def _changed_byte(payload: bytes, index: int) -> bytes:
    changed = bytearray(payload)
    changed[index] ^= 0x01
    return bytes(changed)


@functools.cache
@st.composite
def different_features(draw: st.DrawFn) -> FeaturePair:
    """Two features that differ: the same payload framed two ways (another shape, dtype
    or list split), or one framing with one byte changed. A drawn pair may frame the
    payload twice alike; :func:`same_feature` tells, and the property skips it."""
    words = draw(st.integers(1, 6), label="payload words")
    payload = draw(st.binary(min_size=_WORD * words, max_size=_WORD * words), label="payload")
    framing = _framing(draw, len(payload))
    if draw(st.booleans(), label="one byte changed"):
        index = draw(st.integers(0, len(payload) - 1), label="changed byte")
        changed = _changed_byte(payload, index)
        return FeaturePair(
            framing.apply(payload), framing.apply(changed), f"byte {index} differs"
        )
    other = _framing(draw, len(payload))
    return FeaturePair(
        framing.apply(payload), other.apply(payload), "the same bytes framed otherwise"
    )


@functools.cache
@st.composite
def processed_features(draw: st.DrawFn) -> ProcessedFeature:
    """A processed feature: one array or a list of arrays, of a drawn payload."""
    words = draw(st.integers(1, 6), label="payload words")
    payload = draw(st.binary(min_size=_WORD * words, max_size=_WORD * words), label="payload")
    return _framing(draw, len(payload)).apply(payload)


def _copied(array: NDArray[Any], layout: str) -> NDArray[Any]:
    if layout == "fortran":
        return np.asfortranarray(array.copy())
    if layout == "strided" and array.size > 1:
        # every other element of a wider array: a view that is not contiguous. A
        # one-element array cannot be one (numpy flags it contiguous whatever its
        # strides), so it is copied: no engine meets a strided one-element feature.
        wide = np.repeat(array[..., np.newaxis], 2, axis=-1)
        return wide[..., 0]
    return array.copy()


def describe_layout(feature: ProcessedFeature) -> str:
    """``C``, ``Fortran`` or ``strided`` for each array of ``feature``."""
    arrays = [feature] if isinstance(feature, np.ndarray) else list(feature)
    return ", ".join(
        "C" if array.flags.c_contiguous
        else "Fortran" if array.flags.f_contiguous
        else f"strided {tuple(array.strides)}"
        for array in arrays
    )


@st.composite
def equal_feature_copy(draw: st.DrawFn, feature: ProcessedFeature) -> ProcessedFeature:
    """The same feature in new objects: copies, Fortran-ordered or strided views."""
    layouts = st.sampled_from(["copy", "fortran", "strided"])
    if isinstance(feature, np.ndarray):
        return _copied(feature, draw(layouts, label="layout"))
    arrays: Sequence[NDArray[Any]] = feature
    return [_copied(array, draw(layouts, label="layout")) for array in arrays]

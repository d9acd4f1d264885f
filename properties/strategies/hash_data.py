"""Hash inputs (HASH, ENC-2): equal content in new objects, nested values, pairs of
different structure whose naive concatenation collides, the same bytes under another
shape or dtype, and processor options that differ or are reordered."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy
from numpy.typing import NDArray

from properties.strategies.image_data import (
    PIXEL_DTYPES,
    array_from_bytes,
    pixel_arrays,
    relaid_copy,
)
from spec.types import HashInput


@st.composite
def equal_content_copy(draw: st.DrawFn, value: Any) -> Any:
    """A deep copy of a hash input in new objects: equal content, different identity
    (and array layouts), dict keys in the same order."""
    if isinstance(value, bytes):
        return bytes(bytearray(value))
    if isinstance(value, str):
        return "".join(list(value))
    if isinstance(value, np.ndarray):
        return draw(relaid_copy(value))
    if isinstance(value, list):
        return [draw(equal_content_copy(v)) for v in value]
    if isinstance(value, tuple):
        return tuple(draw(equal_content_copy(v)) for v in value)
    if isinstance(value, dict):
        return {k: draw(equal_content_copy(v)) for k, v in value.items()}
    return value



# --- hash inputs (HASH) ------------------------------------------------------------------

short_text = st.text(alphabet="abcxyz01", min_size=0, max_size=4)


@functools.cache
def hash_leaves() -> SearchStrategy[HashInput]:
    """Scalars, bytes, strings and small arrays."""
    leaves: list[SearchStrategy[Any]] = [
        st.binary(max_size=6),
        short_text,
        st.integers(-1000, 1000),
        st.floats(allow_nan=False, width=64, min_value=-1e6, max_value=1e6),
        st.booleans(),
        st.none(),
        pixel_arrays(1, 3, dtypes=PIXEL_DTYPES),
    ]
    return st.one_of(leaves)


@functools.cache
def hash_inputs(max_leaves: int = 6) -> SearchStrategy[HashInput]:
    """Nested lists, tuples and str-keyed dicts of leaves."""

    def extend(children: SearchStrategy[Any]) -> SearchStrategy[Any]:
        return st.one_of(
            st.lists(children, max_size=3),
            st.lists(children, max_size=3).map(tuple),
            st.dictionaries(short_text, children, max_size=3),
        )

    return st.recursive(hash_leaves(), extend, max_leaves=max_leaves)


@dataclass(frozen=True)
class StructurePair:
    """Two hash inputs with different structure whose leaves, naively concatenated,
    give the same bytes (HASH-4)."""

    first: HashInput
    second: HashInput
    why: str


@functools.cache
@st.composite
def confusable_structures(draw: st.DrawFn) -> StructurePair:
    """Pairs that only a framed serialization tells apart: the split point moved between
    elements, between a dict key and its value, bytes vs str, list vs tuple, one more
    level of nesting, an extra empty element, a dict vs a list of its items."""
    text = draw(st.text(alphabet="abcd", min_size=2, max_size=6))
    kind = draw(
        st.sampled_from(
            ["split", "dict_split", "bytes_vs_str", "list_vs_tuple", "nesting", "empty",
             "dict_vs_list"]
        )
    )
    as_bytes = draw(st.booleans())

    def leaf(s: str) -> HashInput:
        return s.encode() if as_bytes else s

    if kind == "split":
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(0, len(text)).filter(lambda k: k != i))
        container: Callable[[list[HashInput]], HashInput] = draw(
            st.sampled_from([list, tuple])
        )
        return StructurePair(
            container([leaf(text[:i]), leaf(text[i:])]),
            container([leaf(text[:j]), leaf(text[j:])]),
            f"{text!r} split at {i} vs at {j}",
        )
    if kind == "dict_split":
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(0, len(text)).filter(lambda k: k != i))
        return StructurePair(
            {text[:i]: leaf(text[i:])},
            {text[:j]: leaf(text[j:])},
            f"dict key/value boundary of {text!r} at {i} vs at {j}",
        )
    if kind == "bytes_vs_str":
        wrap = draw(st.sampled_from(["bare", "list"]))
        a: HashInput = text.encode()
        b: HashInput = text
        if wrap == "list":
            a, b = [a], [b]
        return StructurePair(a, b, f"bytes vs str of {text!r} ({wrap})")
    if kind == "list_vs_tuple":
        n = draw(st.integers(1, 2))
        items = [leaf(text)] * n
        return StructurePair(list(items), tuple(items), f"list vs tuple of {n} element(s)")
    if kind == "nesting":
        i = draw(st.integers(1, len(text) - 1))
        first, second = leaf(text[:i]), leaf(text[i:])
        nestings: list[HashInput] = [[[first], second], [[first, second]], [first, [second]]]
        other = draw(st.sampled_from(nestings))
        return StructurePair([first, second], other, "one more level of nesting")
    if kind == "empty":
        empties: list[HashInput] = [[], (), {}, "", b""]
        empty = draw(st.sampled_from(empties))
        return StructurePair([leaf(text)], [leaf(text), empty], f"an extra {empty!r}")
    i = draw(st.integers(0, len(text)))
    return StructurePair(
        {text[:i]: leaf(text[i:])}, [text[:i], leaf(text[i:])], "a dict vs a list of its items"
    )


@dataclass(frozen=True)
class ArrayPair:
    """Two arrays with the same data bytes and a different shape or dtype (HASH-3)."""

    first: NDArray[Any]
    second: NDArray[Any]
    why: str


#: dtypes with equal item sizes: the same bytes reinterpreted.
_SAME_ITEMSIZE = ((np.uint8, np.int8), (np.uint16, np.int16, np.float16),
                  (np.uint32, np.int32, np.float32))


@functools.cache
@st.composite
def same_bytes_different_layout(draw: st.DrawFn) -> ArrayPair:
    """The same data bytes viewed with another shape (2x8 vs 4x4 vs 16, an extra
    channel axis) or another dtype (uint8 vs int8, uint8 vs uint16)."""
    kind = draw(st.sampled_from(["shape", "channel_axis", "dtype_same_size", "dtype_wider"]))
    if kind == "shape":
        a_shape, b_shape = draw(
            st.sampled_from(
                [((2, 8), (4, 4)), ((4, 4), (16,)), ((2, 8), (8, 2)), ((1, 16), (16, 1)),
                 ((2, 2, 4), (4, 4)), ((2, 6), (3, 4)), ((2, 3, 2), (3, 2, 2))]
            )
        )
        nbytes = int(np.prod(a_shape))
        data = draw(st.binary(min_size=nbytes, max_size=nbytes))
        return ArrayPair(
            array_from_bytes(data, a_shape, np.uint8),
            array_from_bytes(data, b_shape, np.uint8),
            f"shape {a_shape} vs {b_shape}",
        )
    if kind == "channel_axis":
        h, w = draw(st.integers(1, 4)), draw(st.integers(1, 4))
        data = draw(st.binary(min_size=h * w, max_size=h * w))
        return ArrayPair(
            array_from_bytes(data, (h, w), np.uint8),
            array_from_bytes(data, (h, w, 1), np.uint8),
            f"shape {(h, w)} vs {(h, w, 1)}",
        )
    if kind == "dtype_same_size":
        group = draw(st.sampled_from(_SAME_ITEMSIZE))
        first_t, second_t = draw(st.permutations(group))[:2]
        itemsize = np.dtype(first_t).itemsize
        n = draw(st.integers(1, 6))
        data = draw(st.binary(min_size=n * itemsize, max_size=n * itemsize))
        return ArrayPair(
            array_from_bytes(data, (n,), first_t),
            array_from_bytes(data, (n,), second_t),
            f"dtype {np.dtype(first_t)} vs {np.dtype(second_t)}",
        )
    n = draw(st.integers(1, 4))
    data = draw(st.binary(min_size=2 * n, max_size=2 * n))
    return ArrayPair(
        array_from_bytes(data, (2 * n,), np.uint8),
        array_from_bytes(data, (n,), np.uint16),
        f"dtype uint8 ({2 * n},) vs uint16 ({n},)",
    )


# --- processor options (HASH-5) --------------------------------------------------------

option_values: SearchStrategy[HashInput] = st.one_of(
    st.integers(0, 10_000), st.booleans(), short_text, st.floats(0.0, 10.0, allow_nan=False)
)

OPTION_NAMES = ("max_pixels", "min_pixels", "size", "do_resize", "patch_size", "crop")


@functools.cache
def processor_options(min_size: int = 0, max_size: int = 4) -> SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(OPTION_NAMES), option_values,
                           min_size=min_size, max_size=max_size)


@functools.cache
@st.composite
def different_options(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Two option dicts that differ: one value changed, a key added, or a key renamed."""
    base = draw(processor_options(1, 4))
    key = draw(st.sampled_from(sorted(base)))
    kind = draw(st.sampled_from(["value", "added", "renamed"]))
    other = dict(base)
    if kind == "value":
        # unequal in Python's sense: True and 1 (or 1 and 1.0) are the same option value
        new = draw(option_values.filter(lambda v: bool(v != base[key])))
        other[key] = new
        return base, other, f"{key}={base[key]!r} vs {key}={new!r}"
    if kind == "added":
        del other[key]
        return other, base, f"without vs with {key}={base[key]!r}"
    spare = [n for n in OPTION_NAMES if n not in base]
    if not spare:
        other[key] = (base[key], "changed")
        return base, other, f"{key} changed"
    new_key = draw(st.sampled_from(spare))
    other[new_key] = other.pop(key)
    return base, other, f"option {key} renamed {new_key}"


def reordered(options: Mapping[str, Any]) -> dict[str, Any]:
    """The same options inserted in reverse order."""
    return {k: options[k] for k in reversed(list(options))}

"""Hypothesis strategies shared by the properties and state machines (the
"strategies that aim").

Each strategy aims at the cases where serving engines break rather than at uniform
randomness: images of the same length with different bytes; equal content in different
objects and memory layouts; ``is_embed`` masks that are all-False-but-one or a single
position; markers at position 0, adjacent to each other and at the end of the prompt;
byte sizes on the toy policy's 64-byte boundaries; pixel sizes on the rounding ties of
``smart_resize`` and the aspect-ratio ties of InternVL tiling; requests whose items share
content within and across requests; budgets of 0, exactly an item's size and just below.

Everything here is cheap to generate: large pixel arrays are zero-cost broadcast views
(a policy reads only the shape), real pixel data stays within a few hundred bytes.
Strategy factories are cached (``functools.cache``; their arguments are hashable):
building and validating a strategy again inside every draw costs more than the draw
itself. Factories that take arrays or lists (``relaid_copy``, ``equal_content_copy``,
``request_views``) are not.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from numpy.typing import NDArray

from spec.types import (
    DynamicResolutionPolicy,
    FixedPolicy,
    HashInput,
    ImageInput,
    MultiModalItem,
    PlaceholderRange,
    ProcessorConfig,
    RequestView,
    RowBreakPolicy,
    TiledPolicy,
    TokenCountPolicy,
    ToyPolicy,
)

SearchStrategy = st.SearchStrategy

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


def describe_range(r: PlaceholderRange) -> str:
    mask = ""
    if r.is_embed is not None:
        mask = ", is_embed=" + "".join("1" if b else "0" for b in r.is_embed)
    return f"PlaceholderRange(offset={r.offset}, length={r.length}{mask})"


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


# --- is_embed masks and placeholder ranges ---------------------------------------------


@functools.cache
@st.composite
def is_embed_masks(draw: st.DrawFn, length: int) -> tuple[bool, ...] | None:
    """``None`` (every position embeds), all True, all-False-but-one (the one at the
    start, the end or anywhere), or random with at least one True."""
    kind = draw(st.sampled_from(["none", "all", "one", "random"]))
    if kind == "none":
        return None
    if kind == "all":
        return (True,) * length
    if kind == "one":
        pos = draw(st.sampled_from([0, length - 1]) | st.integers(0, length - 1))
        return tuple(i == pos for i in range(length))
    mask = draw(st.lists(st.booleans(), min_size=length, max_size=length))
    if not any(mask):
        mask[draw(st.integers(0, length - 1))] = True
    return tuple(mask)


@functools.cache
@st.composite
def placeholder_ranges(
    draw: st.DrawFn,
    min_offset: int = 0,
    max_offset: int = 16,
    max_length: int = 8,
    masks: bool = True,
) -> PlaceholderRange:
    """Ranges at offset 0 often, single-position ranges often, with or without
    ``is_embed``."""
    offset = draw(st.sampled_from([min_offset]) | st.integers(min_offset, max_offset))
    length = draw(st.sampled_from([1]) | st.integers(1, max_length))
    mask = draw(is_embed_masks(length)) if masks else None
    return PlaceholderRange(offset, length, mask)


# --- requests (ECM, SCH) -----------------------------------------------------------------


@dataclass(frozen=True)
class MMContent:
    """One piece of multimodal content: a hash with its placeholder shape. Every item
    with this hash has this length and mask (so equal hash means equal num_embeds)."""

    mm_hash: str
    length: int
    is_embed: tuple[bool, ...] | None = None

    @property
    def num_embeds(self) -> int:
        return self.length if self.is_embed is None else sum(self.is_embed)


@functools.cache
@st.composite
def mm_contents(
    draw: st.DrawFn, mm_hash: str, max_length: int = 6, masks: bool = True
) -> MMContent:
    length = draw(st.sampled_from([1]) | st.integers(1, max_length))
    mask = draw(is_embed_masks(length)) if masks else None
    return MMContent(mm_hash, length, mask)


@functools.cache
@st.composite
def content_pools(
    draw: st.DrawFn,
    min_size: int = 1,
    max_size: int = 4,
    max_length: int = 6,
    masks: bool = True,
) -> tuple[MMContent, ...]:
    """A few distinct contents named "A", "B", ... that requests draw from."""
    n = draw(st.integers(min_size, max_size))
    return tuple(
        draw(mm_contents(string.ascii_uppercase[i], max_length, masks)) for i in range(n)
    )


@st.composite
def request_views(
    draw: st.DrawFn,
    pool: Sequence[MMContent],
    request_id: str,
    min_items: int = 0,
    max_items: int = 4,
    max_gap: int = 4,
) -> RequestView:
    """A request whose items come from ``pool`` (so the same content may occur twice in
    one request), placed with text gaps of 0..max_gap tokens (0: the first item at
    offset 0, or two items adjacent)."""
    n = draw(st.integers(min_items, max_items))
    offset = 0
    items: list[MultiModalItem] = []
    for _ in range(n):
        content = draw(st.sampled_from(list(pool)))
        offset += draw(st.sampled_from([0]) | st.integers(0, max_gap))
        items.append(
            MultiModalItem(content.mm_hash, PlaceholderRange(offset, content.length,
                                                             content.is_embed))
        )
        offset += content.length
    return RequestView(request_id, tuple(items))


def prompt_length_of(request: RequestView, trailing_text: int = 0) -> int:
    """The smallest prompt that holds every item of ``request``, plus trailing text."""
    end = max((it.mm_position.end for it in request.items), default=0)
    return end + trailing_text


@st.composite
def requests_sharing_content(
    draw: st.DrawFn,
    min_requests: int = 1,
    max_requests: int = 3,
    max_items: int = 4,
    pool: Sequence[MMContent] | None = None,
) -> tuple[RequestView, ...]:
    """Several requests ("r0", "r1", ...) drawing from one content pool: content shared
    within and across requests."""
    contents = pool if pool is not None else draw(content_pools())
    n = draw(st.integers(min_requests, max_requests))
    return tuple(
        draw(request_views(contents, f"r{i}", 0, max_items)) for i in range(n)
    )


@functools.cache
def budgets_around(size: int, spread: int = 2) -> SearchStrategy[int]:
    """Budgets (or capacities) that aim at ``size``: 0, just below, exactly, just above,
    or anything up to twice it."""
    aimed = sorted({0, max(0, size - 1), size, size + 1})
    return st.sampled_from(aimed) | st.integers(0, max(1, spread * size))


# --- processor configs and prompts (EXP, SPL-5) ---------------------------------------

DEFAULT_SPECIALS = (32000, 32001, 32002, 32003)


@functools.cache
@st.composite
def special_id_sets(draw: st.DrawFn) -> tuple[int, int, int, int]:
    """(marker, placeholder, break, end): the defaults, small ids (0 is a marker), or a
    shuffle, so that no implementation can hard-code them."""
    kind = draw(st.sampled_from(["default", "small", "shuffled"]))
    if kind == "default":
        return DEFAULT_SPECIALS
    pool = [0, 1, 2, 3] if kind == "small" else [5, 17, 99, 32000]
    marker, placeholder, brk, end = draw(st.permutations(pool))
    return marker, placeholder, brk, end


def config_for(policy: TokenCountPolicy, specials: tuple[int, int, int, int]) -> ProcessorConfig:
    marker, placeholder, brk, end = specials
    return ProcessorConfig(policy=policy, marker_id=marker, placeholder_id=placeholder,
                           break_id=brk, end_id=end)


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


@dataclass(frozen=True)
class PromptCase:
    """A prompt with one marker per image, the images, and the processor config."""

    config: ProcessorConfig
    prompt: tuple[int, ...]
    images: tuple[ImageInput, ...]

    @property
    def marker_positions(self) -> tuple[int, ...]:
        return tuple(i for i, t in enumerate(self.prompt) if t == self.config.marker_id)

    def describe(self) -> str:
        imgs = "; ".join(describe_image(i) for i in self.images) or "no images"
        return (
            f"policy {self.config.policy}, prompt {list(self.prompt)} "
            f"(markers {self.config.marker_id} at {list(self.marker_positions)}), "
            f"images: {imgs}"
        )


@functools.cache
def text_tokens(specials: tuple[int, ...]) -> SearchStrategy[int]:
    """Text token ids: small non-negative ints that avoid the special ids."""
    taken = set(specials)
    return st.integers(0, 60).map(lambda t: t if t not in taken else t + 1000)


@functools.cache
@st.composite
def prompts_with_markers(
    draw: st.DrawFn, config: ProcessorConfig, num_markers: int, max_text_run: int = 3
) -> tuple[int, ...]:
    """Text runs of 0..max_text_run tokens around ``num_markers`` markers; a run of 0
    puts a marker at position 0, two markers side by side, or a marker at the end."""
    text = text_tokens(tuple(sorted(config.special_ids())))
    prompt: list[int] = []
    for i in range(num_markers + 1):
        run = draw(st.sampled_from([0]) | st.integers(0, max_text_run))
        prompt.extend(draw(st.lists(text, min_size=run, max_size=run)))
        if i < num_markers:
            prompt.append(config.marker_id)
    return tuple(prompt)


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


@functools.cache
@st.composite
def prompt_cases(
    draw: st.DrawFn,
    policies: SearchStrategy[TokenCountPolicy] | None = None,
    min_images: int = 0,
    max_images: int = 3,
    max_side: int = 24,
) -> PromptCase:
    """A processor config (any policy, any special ids), a prompt with one marker per
    image, and images aimed at the policy's boundaries."""
    policy = draw(policies if policies is not None else small_policies())
    config = config_for(policy, draw(special_id_sets()))
    n = draw(st.integers(min_images, max_images))
    prompt = draw(prompts_with_markers(config, n))
    imgs = tuple(draw(images_for_policy(policy, max_side)) for _ in range(n))
    return PromptCase(config, prompt, imgs)


@functools.cache
def positions_around_items(request: RequestView, prompt_length: int) -> SearchStrategy[int]:
    """Prompt positions (e.g. ``num_computed_tokens`` or a chunk end) aimed at the items'
    boundaries: 0, each offset and end, one before and one after, clipped to
    ``[0, prompt_length]``; or anything in between."""
    aimed = {0, prompt_length}
    for item in request.items:
        for edge in (item.mm_position.offset, item.mm_position.end):
            aimed.update({edge - 1, edge, edge + 1})
    inside = sorted(p for p in aimed if 0 <= p <= prompt_length)
    return st.sampled_from(inside) | st.integers(0, prompt_length)

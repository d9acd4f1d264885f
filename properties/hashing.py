"""HASH — content identity (SPEC.md HASH-1..5; HASH-6 lives with the cache machine).

``mm_hash`` must be a function of content and options, never of object identity, length
or memory layout, and the serialization behind it must frame structure so that
different inputs cannot collide by construction. Each property pairs inputs that a
plausible shortcut (hash the length, forget the shape, concatenate without framing,
drop the options) would confuse.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, note
from hypothesis import strategies as st

from properties.framework import Parts, Runnable, check, clause_property, stateless
from properties.strategies import (
    ArrayPair,
    StructurePair,
    confusable_structures,
    describe_image,
    different_options,
    equal_content_copy,
    hash_inputs,
    images,
    processor_options,
    reordered,
    same_bytes_different_layout,
    same_length_different_bytes,
    same_shape_different_pixels,
)
from spec.types import HashInput


def _describe(value: object) -> str:
    text = repr(value) if not hasattr(value, "shape") else describe_image(value)
    return text if len(text) <= 120 else text[:117] + "..."


# --- HASH-1 ----------------------------------------------------------------------------


@st.composite
def _equal_content(draw: st.DrawFn) -> tuple[HashInput, HashInput, dict[str, Any], dict[str, Any]]:
    value = draw(hash_inputs() | images())
    options = draw(processor_options())
    return value, draw(equal_content_copy(value)), options, draw(equal_content_copy(options))


@clause_property("hash_equal_content_equal_hash", "HASH-1", subject=("hasher",))
def hash_equal_content_equal_hash(parts: Parts) -> Runnable:
    """HASH-1: equal content (in new objects, other layouts, another hasher) hashes equal,
    on every call."""

    @given(case=_equal_content())
    def test(case: tuple[HashInput, HashInput, dict[str, Any], dict[str, Any]]) -> None:
        value, copy, options, options_copy = case
        note(f"content {_describe(value)} with options {options}; an equal copy in new "
             f"objects: {_describe(copy)}")
        hasher = parts.hasher()
        first = hasher.hash_item(value, options)
        again = hasher.hash_item(value, options)
        check(first == again, "HASH-1",
              f"hashing the same content twice gave {first} then {again}")
        of_copy = hasher.hash_item(copy, options_copy)
        check(first == of_copy, "HASH-1",
              f"equal content in different objects hashed {first} and {of_copy}")
        other_hasher = parts.hasher().hash_item(copy, options_copy)
        check(first == other_hasher, "HASH-1",
              f"a second hasher instance hashed equal content {other_hasher}, not {first}")

    return stateless(test)


# --- HASH-2 ----------------------------------------------------------------------------


@st.composite
def _same_length_pairs(draw: st.DrawFn) -> tuple[HashInput, HashInput, str]:
    """Bytes (or uint8 pixel arrays) of the same size with different content, bare or
    inside the same surrounding structure."""
    if draw(st.booleans()):
        a, b = draw(same_length_different_bytes())
        first: HashInput = a
        second: HashInput = b
        what = f"{len(a)} bytes each"
    else:
        x, y = draw(same_shape_different_pixels())
        first, second = x, y
        what = f"{describe_image(x)} each"
    wrap = draw(st.sampled_from(["bare", "list", "dict"]))
    if wrap == "list":
        first, second = [b"ctx", first], [b"ctx", second]
    elif wrap == "dict":
        first, second = {"image": first, "n": 1}, {"image": second, "n": 1}
    return first, second, f"{what}, {wrap}"


@clause_property("hash_same_length_different_bytes", "HASH-2", subject=("hasher",))
def hash_same_length_different_bytes(parts: Parts) -> Runnable:
    """HASH-2: different bytes of the same length hash differently."""

    @given(case=_same_length_pairs())
    def test(case: tuple[HashInput, HashInput, str]) -> None:
        first, second, what = case
        note(f"two images of the same size, different bytes ({what}): "
             f"{_describe(first)} vs {_describe(second)}")
        hasher = parts.hasher()
        h1, h2 = hasher.hash_item(first), hasher.hash_item(second)
        check(h1 != h2, "HASH-2",
              f"different content of the same length ({what}) hashed equal: {h1}")

    return stateless(test)


# --- HASH-3 ----------------------------------------------------------------------------


@clause_property("hash_array_dtype_and_shape", "HASH-3", subject=("hasher",))
def hash_array_dtype_and_shape(parts: Parts) -> Runnable:
    """HASH-3: the same data bytes under another shape or dtype hash differently."""

    @given(pair=same_bytes_different_layout())
    def test(pair: ArrayPair) -> None:
        note(f"the same data bytes as {describe_image(pair.first)} and "
             f"{describe_image(pair.second)} ({pair.why})")
        hasher = parts.hasher()
        h1, h2 = hasher.hash_item(pair.first), hasher.hash_item(pair.second)
        check(h1 != h2, "HASH-3",
              f"arrays with the same bytes but {pair.why} hashed equal: {h1}")

    return stateless(test)


# --- HASH-4 ----------------------------------------------------------------------------


@clause_property("hash_structure_framed", "HASH-4", subject=("hasher",))
def hash_structure_framed(parts: Parts) -> Runnable:
    """HASH-4: structures that only a framed serialization tells apart hash differently."""

    @given(pair=confusable_structures())
    def test(pair: StructurePair) -> None:
        note(f"{pair.first!r} vs {pair.second!r}: {pair.why}")
        hasher = parts.hasher()
        h1, h2 = hasher.hash_item(pair.first), hasher.hash_item(pair.second)
        check(h1 != h2, "HASH-4",
              f"different structures {pair.first!r} and {pair.second!r} ({pair.why}) "
              f"hashed equal: {h1}")

    return stateless(test)


# --- HASH-5 ----------------------------------------------------------------------------


@clause_property("hash_covers_processor_options", "HASH-5", subject=("hasher",))
def hash_covers_processor_options(parts: Parts) -> Runnable:
    """HASH-5: different options give different hashes; equal options in another
    order give the same, and no options hash as empty options."""

    # A JSON-reachable collision (issue 14): the int 4607182418800017408 and the float 1.0
    # have the same eight bytes; a hash without a type tag confuses the two options.
    @example(
        image=b"\x01\x02\x03",
        options=(
            {"x": 4607182418800017408},
            {"x": 1.0},
            "an int and a float with the same eight bytes",
        ),
    )
    @given(image=images(max_bytes=64, max_side=4), options=different_options())
    def test(image: HashInput, options: tuple[dict[str, Any], dict[str, Any], str]) -> None:
        first, second, why = options
        note(f"image {_describe(image)} under options {first} and {second} ({why})")
        hasher = parts.hasher()
        h1, h2 = hasher.hash_item(image, first), hasher.hash_item(image, second)
        check(h1 != h2, "HASH-5",
              f"the same image under different options ({why}) hashed equal: {h1}")
        shuffled = reordered(second)
        h3 = hasher.hash_item(image, shuffled)
        check(h2 == h3, "HASH-5",
              f"equal options {second} in another order {list(shuffled)} hashed "
              f"differently: {h2} vs {h3}")
        bare, empty = hasher.hash_item(image), hasher.hash_item(image, {})
        check(bare == empty, "HASH-5",
              f"no options and empty options are the same identity, but hashed {bare} "
              f"and {empty}")

    return stateless(test)

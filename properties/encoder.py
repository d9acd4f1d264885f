"""ENC — the toy encoder (SPEC.md ENC-1..4).

The encoder is the expensive thing the cache saves, so it must be reproducible: its
output is a pure function of the image's content and the row count, in any object, any
memory layout, any encoder instance, alone or in a batch; and its call counter is the
measure of what the cache saved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import given, note
from hypothesis import strategies as st
from numpy.typing import NDArray

from properties.framework import (
    Parts,
    Runnable,
    check,
    clause_property,
    expect_error,
    stateless,
)
from properties.strategies import (
    ArrayPair,
    describe_image,
    equal_content_copy,
    images,
    same_bytes_different_layout,
    same_length_different_bytes,
    same_shape_different_pixels,
)
from spec.components import Encoder
from spec.errors import InvalidInputError
from spec.types import ImageInput

hidden_sizes = st.sampled_from([1, 8]) | st.integers(1, 8)
row_counts = st.sampled_from([1]) | st.integers(1, 6)


def _bitwise_equal(a: NDArray[Any], b: NDArray[Any]) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# --- ENC-1 -----------------------------------------------------------------------------


@clause_property("enc_output_shape", "ENC-1", subject=("encoder",))
def enc_output_shape(parts: Parts) -> Runnable:
    """ENC-1: encode(image, n) is a finite float32 (n, hidden_size) array; an n that is
    not an int >= 1 (0, negative, a float, a bool, a string) raises InvalidInputError."""

    @given(
        image=images(max_bytes=200, max_side=6),
        hidden=hidden_sizes,
        n=row_counts,
        bad_n=st.sampled_from([0, -1, 2.5, 3.0, True, "3"]) | st.integers(-(2**31), 0),
    )
    def test(image: ImageInput, hidden: int, n: int, bad_n: object) -> None:
        note(f"encoder of hidden size {hidden} encodes {describe_image(image)} into {n} rows")
        encoder = parts.encoder(hidden)
        check(encoder.hidden_size == hidden, "ENC-1",
              f"built with hidden size {hidden}, the encoder reports {encoder.hidden_size}")
        out = encoder.encode(image, n)
        check(isinstance(out, np.ndarray), "ENC-1",
              f"encode returned a {type(out).__name__}, not a numpy array")
        check(out.shape == (n, hidden), "ENC-1",
              f"encode(image, {n}) has shape {out.shape}, expected {(n, hidden)}")
        check(out.dtype == np.float32, "ENC-1", f"encode returned dtype {out.dtype}, not float32")
        check(bool(np.isfinite(out).all()), "ENC-1", "encode returned non-finite values")
        note(f"then asks for {bad_n!r} rows")
        expect_error("ENC-1", InvalidInputError,
                     lambda: encoder.encode(image, bad_n),  # type: ignore[arg-type]
                     f"encode(image, {bad_n!r})")

    return stateless(test)


# --- ENC-2 -----------------------------------------------------------------------------


def _as_image(array: NDArray[Any]) -> NDArray[Any]:
    """A 1-D array is not an image; give it a height of 1."""
    return array.reshape(1, -1) if array.ndim == 1 else array


@st.composite
def _different_content(draw: st.DrawFn) -> tuple[ImageInput, ImageInput, str]:
    """Different content of the same size: bytes, pixels, or the same pixel bytes with
    another shape or dtype."""
    kind = draw(st.sampled_from(["bytes", "pixels", "layout"]))
    if kind == "bytes":
        a, b = draw(same_length_different_bytes(1, 200))
        return a, b, f"{len(a)} bytes each, different content"
    if kind == "pixels":
        x, y = draw(same_shape_different_pixels(6))
        return x, y, f"{describe_image(x)} each, different pixels"
    pair: ArrayPair = draw(same_bytes_different_layout())
    first, second = _as_image(pair.first), _as_image(pair.second)
    if first.shape == second.shape and first.dtype == second.dtype:
        second = second.reshape(second.shape[::-1] + (1,))
    return first, second, f"same bytes, {pair.why}"


@clause_property("enc_deterministic_by_content", "ENC-2", subject=("encoder",))
def enc_deterministic_by_content(parts: Parts) -> Runnable:
    """ENC-2: output is a pure function of content and n: equal content gives bitwise
    equal rows in any object or instance; different content of the same size does not."""

    @given(
        image=images(max_bytes=200, max_side=6),
        data=st.data(),
        different=_different_content(),
        hidden=hidden_sizes,
        n=row_counts,
    )
    def test(
        image: ImageInput,
        data: st.DataObject,
        different: tuple[ImageInput, ImageInput, str],
        hidden: int,
        n: int,
    ) -> None:
        copy = data.draw(equal_content_copy(image), label="equal copy")
        note(f"{describe_image(image)} and an equal copy {describe_image(copy)}, {n} rows")
        encoder = parts.encoder(hidden)
        first = encoder.encode(image, n)
        a, b, why = different
        note(f"in between, {describe_image(a)} and {describe_image(b)} ({why})")
        out_a, out_b = encoder.encode(a, n), encoder.encode(b, n)
        check(not _bitwise_equal(out_a, out_b), "ENC-2",
              f"different content ({why}) gave bitwise-equal embeddings")
        again = encoder.encode(image, n)
        check(_bitwise_equal(first, again), "ENC-2",
              "encoding the same image again (after other images) changed its embeddings")
        of_copy = encoder.encode(copy, n)
        check(_bitwise_equal(first, of_copy), "ENC-2",
              "equal content in a different object gave different embeddings")
        fresh = parts.encoder(hidden).encode(copy, n)
        check(_bitwise_equal(first, fresh), "ENC-2",
              "a second encoder instance gave different embeddings for equal content")

    return stateless(test)


# --- ENC-3 -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Op:
    """One encoder call: a single encode, a batch, a rejected call, or a read."""

    kind: str
    items: tuple[tuple[ImageInput, int], ...] = ()

    def describe(self) -> str:
        if self.kind == "read":
            return "read num_calls and hidden_size"
        if self.kind == "bad":
            return "encode with num_embeds 0 (rejected)"
        parts = ", ".join(f"({describe_image(i)}, {n})" for i, n in self.items)
        return f"{self.kind} [{parts}]"


_item = st.tuples(images(max_bytes=100, max_side=4), row_counts)
_ops = st.one_of(
    st.builds(lambda it: _Op("encode", (it,)), _item),
    st.builds(lambda its: _Op("encode_batch", tuple(its)), st.lists(_item, max_size=4)),
    st.just(_Op("bad", ((b"\x01", 0),))),
    st.just(_Op("read")),
)


def _apply(encoder: Encoder, op: _Op) -> int:
    """Run one op; return how many items it encoded (-1: unknown)."""
    if op.kind == "encode":
        [(image, n)] = op.items
        encoder.encode(image, n)
        return 1
    if op.kind == "encode_batch":
        encoder.encode_batch(list(op.items))
        return len(op.items)
    if op.kind == "bad":
        image, n = op.items[0]
        try:
            encoder.encode(image, n)
        except InvalidInputError:
            return 0  # a rejected call encodes nothing, so it must not count
        # Accepting it breaks ENC-1 (enc_output_shape says so); whether it then counts
        # as an encoded item is not for this property to judge.
        note("the encoder accepted it; not counting this call either way")
        return -1
    _ = encoder.hidden_size
    return 0


@clause_property("enc_counts_calls", "ENC-3", subject=("encoder",))
def enc_counts_calls(parts: Parts) -> Runnable:
    """ENC-3: num_calls grows by one per encoded item and never otherwise."""

    @given(ops=st.lists(_ops, min_size=1, max_size=6))
    def test(ops: list[_Op]) -> None:
        encoder = parts.encoder(4)
        check(encoder.num_calls == 0, "ENC-3",
              f"a new encoder reports {encoder.num_calls} calls, not 0")
        expected = 0
        for op in ops:
            note(op.describe())
            encoded = _apply(encoder, op)
            expected = encoder.num_calls if encoded < 0 else expected + encoded
            check(encoder.num_calls == expected, "ENC-3",
                  f"after {op.describe()}, num_calls is {encoder.num_calls}; "
                  f"{expected} items have been encoded")

    return stateless(test)


# --- ENC-4 -----------------------------------------------------------------------------


@st.composite
def _batches(draw: st.DrawFn) -> list[tuple[ImageInput, int]]:
    """Up to 5 items, often repeating an image (with the same or another row count)."""
    pool = draw(st.lists(images(max_bytes=100, max_side=4), min_size=1, max_size=3))
    n = draw(st.integers(1, 5))
    return [(draw(st.sampled_from(pool)), draw(row_counts)) for _ in range(n)]


@clause_property("enc_batch_equals_single", "ENC-4", subject=("encoder",))
def enc_batch_equals_single(parts: Parts) -> Runnable:
    """ENC-4: encode_batch equals encoding each item alone, bitwise, one call per item."""

    @given(items=_batches(), hidden=hidden_sizes)
    def test(items: list[tuple[ImageInput, int]], hidden: int) -> None:
        note("batch: " + "; ".join(f"{describe_image(i)} x{n} rows" for i, n in items))
        encoder = parts.encoder(hidden)
        batch = encoder.encode_batch(list(items))
        check(encoder.num_calls == len(items), "ENC-4",
              f"a batch of {len(items)} items counted {encoder.num_calls} calls")
        check(len(batch) == len(items), "ENC-4",
              f"a batch of {len(items)} items returned {len(batch)} outputs")
        for k, ((image, n), out) in enumerate(zip(items, batch, strict=True)):
            single = parts.encoder(hidden).encode(image, n)
            check(_bitwise_equal(out, single), "ENC-4",
                  f"item {k} ({describe_image(image)}, {n} rows) encoded in a batch differs "
                  f"from encoding it alone")

    return stateless(test)

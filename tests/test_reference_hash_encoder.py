"""Unit tests of the reference hasher (HASH-1..5) and toy encoder (ENC-1..4)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest

from reference.encoder import Encoder
from reference.hasher import Hasher, serialize
from spec.errors import InvalidInputError

HASH = Hasher().hash_item


# --- hasher ----------------------------------------------------------------------------


def test_hash_is_sha256_hex_of_the_framed_pair() -> None:
    digest = HASH(b"img")
    assert len(digest) == 64 and int(digest, 16) >= 0
    assert digest != hashlib.sha256(b"img").hexdigest()  # framed, not the raw bytes


def test_frame_layout() -> None:
    assert serialize(b"x") == b"Y" + (1).to_bytes(8, "big") + b"x"
    assert serialize("x") == b"S" + (1).to_bytes(8, "big") + b"x"
    assert serialize(None) == b"N" + (0).to_bytes(8, "big")


def test_equal_content_in_different_objects_hashes_equal() -> None:
    first, second = bytes(bytearray(b"photo" * 10)), b"photo" * 10
    assert first is not second
    assert HASH(first) == HASH(second) == HASH(first)
    array = np.arange(12, dtype=np.uint8).reshape(3, 4)
    assert HASH(array) == HASH(array.copy())
    # Content, not layout: a Fortran-ordered copy has the same pixels.
    assert HASH(array) == HASH(np.asfortranarray(array))
    assert HASH(array[:, ::2]) == HASH(np.ascontiguousarray(array[:, ::2]))


def test_same_length_different_bytes_hash_differently() -> None:
    assert HASH(b"a" * 64) != HASH(b"a" * 63 + b"b")


def test_arrays_hash_dtype_and_shape() -> None:
    data = np.arange(16, dtype=np.uint8)
    assert HASH(data.reshape(2, 8)) != HASH(data.reshape(4, 4))
    assert HASH(data.view(np.int8)) != HASH(data)
    assert HASH(data.view(">u2")) != HASH(data.view("<u2"))
    assert HASH(data) != HASH(data.tobytes())


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (["ab", "c"], ["a", "bc"]),
        ({"a": b"bc"}, {"ab": b"c"}),
        (b"x", "x"),
        (["x"], ("x",)),
        ([["a"], "b"], [["a", "b"]]),
        ([], ()),
        ({}, []),
        ({"a": "b"}, ["a", "b"]),
        (None, False),
        (False, 0),
        (0, 0.0),
        (True, 1),
        (1, "1"),
        (0.0, -0.0),
    ],
)
def test_different_structures_never_collide(left: object, right: object) -> None:
    assert HASH(left) != HASH(right)  # type: ignore[arg-type]


def test_numpy_scalars_hash_as_the_values_they_equal() -> None:
    assert HASH(np.int64(3)) == HASH(3)  # type: ignore[arg-type]
    assert HASH(np.float32(0.5)) == HASH(0.5)  # type: ignore[arg-type]
    assert HASH(np.bool_(True)) == HASH(True)  # type: ignore[arg-type]


def test_options_are_part_of_the_identity() -> None:
    image = b"pixels"
    assert HASH(image, {"max_pixels": 1024}) != HASH(image, {"max_pixels": 2048})
    assert HASH(image, {"max_pixels": 1024}) != HASH(image)
    assert HASH(image, {"a": 1, "b": 2}) == HASH(image, {"b": 2, "a": 1})
    assert HASH(image, None) == HASH(image, {})
    # The options never run into the data.
    assert HASH({"a": 1}) != HASH({}, {"a": 1})


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({1, 2}, "set"),
        (object(), "object"),
        ({1: "x"}, "int key"),
        (np.array([object()]), "object references"),
        (bytearray(b"x"), "bytearray"),
        ([b"ok", {"k": {3.5}}], "set"),
    ],
)
def test_unhashable_input_is_rejected(data: object, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        HASH(data)  # type: ignore[arg-type]


def test_options_must_be_a_mapping() -> None:
    with pytest.raises(InvalidInputError, match="options"):
        HASH(b"x", [("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="keys must be str"):
        HASH(b"x", {1: 2})  # type: ignore[dict-item]


# --- encoder ---------------------------------------------------------------------------


def test_output_shape_and_dtype() -> None:
    out = Encoder(8).encode(b"img", 5)
    assert out.shape == (5, 8) and out.dtype == np.float32
    assert np.isfinite(out).all()
    assert Encoder(3).hidden_size == 3


def test_output_is_a_pure_function_of_content() -> None:
    a, b = Encoder(4), Encoder(4)
    image = np.arange(24, dtype=np.uint8).reshape(4, 6)
    assert np.array_equal(a.encode(image, 3), b.encode(image.copy(), 3))
    assert np.array_equal(a.encode(b"x" * 10, 3), a.encode(bytes(b"x" * 10), 3))
    assert not np.array_equal(a.encode(b"x" * 10, 3), a.encode(b"y" * 10, 3))
    # Same bytes, other shape: other content.
    assert not np.array_equal(a.encode(image, 3), a.encode(image.reshape(6, 4), 3))
    assert not np.array_equal(a.encode(image, 3), a.encode(image.tobytes(), 3))


def test_num_calls_counts_items() -> None:
    encoder = Encoder(2)
    assert encoder.num_calls == 0
    encoder.encode(b"a", 1)
    encoder.encode(b"a", 1)
    assert encoder.num_calls == 2
    encoder.encode_batch([(b"a", 1), (b"b", 2), (b"c", 3)])
    assert encoder.num_calls == 5
    encoder.encode_batch([])
    assert encoder.num_calls == 5


def test_batch_equals_single_bitwise() -> None:
    items: list[tuple[Any, int]] = [(b"a", 2), (np.ones((3, 3), dtype=np.float32), 4), (b"a", 2)]
    batched = Encoder(6).encode_batch(items)
    single = [Encoder(6).encode(image, n) for image, n in items]
    assert len(batched) == 3
    for got, want in zip(batched, single, strict=True):
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize(
    ("image", "num_embeds", "match"),
    [
        (b"x", 0, ">= 1"),
        (b"x", -2, ">= 1"),
        (b"x", True, "int"),
        (b"x", 1.0, "int"),
        (b"", 1, "0 bytes"),
        ("x", 1, "bytes or a numpy"),
        (np.zeros((0, 3)), 1, "empty"),
    ],
)
def test_bad_encode_input_is_rejected_and_not_counted(
    image: object, num_embeds: object, match: str
) -> None:
    encoder = Encoder(2)
    with pytest.raises(InvalidInputError, match=match):
        encoder.encode(image, num_embeds)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=match):
        encoder.encode_batch([(b"fine", 1), (image, num_embeds)])  # type: ignore[list-item]
    assert encoder.num_calls == 0


def test_bad_batch_shape_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="pair"):
        Encoder(2).encode_batch([b"x"])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="list"):
        Encoder(2).encode_batch(b"x")  # type: ignore[arg-type]


@pytest.mark.parametrize(("hidden_size", "match"), [(0, ">= 1"), (-1, ">= 1"), (2.0, "int")])
def test_bad_hidden_size(hidden_size: object, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        Encoder(hidden_size)  # type: ignore[arg-type]


def test_a_uuid_never_names_a_content_hash() -> None:
    """HASH-7, HASH-8: a uuid's identifier ignores the data and is tagged apart from
    content hashes, even when the uuid is a content hash."""
    from reference.hasher import Hasher

    hasher = Hasher()
    content = hasher.hash_item(b"image", {})
    assert hasher.item_identifier(b"image", {}, None) == content
    assert hasher.item_identifier(b"other", {}, content) != content
    assert hasher.item_identifier(None, {}, "u") == hasher.item_identifier(b"x", None, "u")
    assert hasher.item_identifier(None, {"a": 1}, "u") != hasher.item_identifier(None, {}, "u")

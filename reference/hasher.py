"""Content identity (HASH-1..5, 7..10): ``mm_hash`` is the sha256 of a framed serialization.

Every value is written as a *frame*: a one-byte type tag, an 8-byte big-endian payload
length, then the payload. Containers frame each element, so no two different
structures produce the same byte stream: ``["ab", "c"]`` and ``["a", "bc"]`` differ in
their lengths, ``b"x"`` and ``"x"`` in their tags, a list and a tuple in theirs, and a
dict's keys can never run into its values (HASH-4). Arrays carry ``dtype.str``, shape
and C-contiguous bytes (HASH-3). The serialization reads content only, never
``id()``, so equal content in different objects hashes equal (HASH-1).

A processed feature (HASH-9, HASH-10) is serialized the same way under a tag of its own:
each array framed with its dtype, shape and bytes, a list of arrays as a list, so that
features differing in shape, dtype or where a list's arrays begin and end never share an
identity, and equal features in other objects (copies, strided views) always do.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from spec.errors import InvalidInputError
from spec.types import HashInput, ProcessedFeature

_TAG_NONE = b"N"
_TAG_BOOL = b"B"
_TAG_INT = b"I"
_TAG_FLOAT = b"F"
_TAG_STR = b"S"
_TAG_BYTES = b"Y"
_TAG_ARRAY = b"A"
_TAG_LIST = b"L"
_TAG_TUPLE = b"T"
_TAG_DICT = b"D"
_TAG_ITEM = b"H"  # the top-level (data, options) pair
_TAG_UUID = b"U"  # the top-level (request-supplied uuid, options) pair (HASH-8)
_TAG_FEATURE = b"P"  # a top-level processed feature (HASH-9, HASH-10)
_TAG_CLIENT_HASH = b"C"  # a top-level request-supplied feature hash (HASH-11)


def frame(tag: bytes, payload: bytes) -> bytes:
    """``tag`` + 8-byte big-endian ``len(payload)`` + ``payload``."""
    return tag + struct.pack(">Q", len(payload)) + payload


def serialize(data: object) -> bytes:
    """The framed, type-tagged byte stream of ``data`` (see the module docstring).
    Raises ``InvalidInputError`` for a type the hasher does not accept."""
    # bool before int (bool is an int); numpy scalars hash as the Python value they equal.
    if data is None:
        return frame(_TAG_NONE, b"")
    if isinstance(data, (bool, np.bool_)):
        return frame(_TAG_BOOL, b"\x01" if data else b"\x00")
    if isinstance(data, (int, np.integer)):
        return frame(_TAG_INT, str(int(data)).encode("ascii"))
    if isinstance(data, (float, np.floating)):
        return frame(_TAG_FLOAT, struct.pack(">d", float(data)))
    if isinstance(data, str):
        return frame(_TAG_STR, data.encode("utf-8", "surrogatepass"))
    if isinstance(data, bytes):
        return frame(_TAG_BYTES, data)
    if isinstance(data, np.ndarray):
        return _serialize_array(data)
    if isinstance(data, list):
        return frame(_TAG_LIST, b"".join(serialize(element) for element in data))
    if isinstance(data, tuple):
        return frame(_TAG_TUPLE, b"".join(serialize(element) for element in data))
    if isinstance(data, Mapping):
        return _serialize_mapping(data)
    raise InvalidInputError(f"cannot hash a value of type {type(data).__name__}")


def _serialize_array(array: np.ndarray[Any, Any]) -> bytes:
    if array.dtype.hasobject:
        raise InvalidInputError(
            f"cannot hash an array of dtype {array.dtype}: it holds object references"
        )
    shape = tuple(int(side) for side in array.shape)
    data = np.ascontiguousarray(array).tobytes()  # C order, whatever the strides
    return frame(_TAG_ARRAY, serialize(array.dtype.str) + serialize(shape) + serialize(data))


def _serialize_mapping(mapping: Mapping[Any, Any]) -> bytes:
    for key in mapping:
        if not isinstance(key, str):
            raise InvalidInputError(
                f"cannot hash a mapping with a {type(key).__name__} key ({key!r}); keys must be str"
            )
    # Sorted by key: equal mappings in a different insertion order hash equal (HASH-5).
    body = b"".join(serialize(key) + serialize(mapping[key]) for key in sorted(mapping))
    return frame(_TAG_DICT, body)


class Hasher:
    """sha256 of the framed ``(data, options)`` pair (``spec.components.Hasher``).

    ``options`` are the processor options that change the encoder output or the token
    count (HASH-5); ``None`` means no options and hashes like ``{}``.
    """

    def hash_item(self, data: HashInput, options: Mapping[str, HashInput] | None = None) -> str:
        return _digest(_TAG_ITEM, serialize(data), options)

    def item_identifier(
        self,
        data: HashInput | None,
        options: Mapping[str, HashInput] | None,
        uuid: str | None,
    ) -> str:
        """The content hash without a ``uuid``; with one, the sha256 of the framed
        ``(uuid, options)`` pair under a tag of its own (HASH-7, HASH-8). The data is
        not read: the client promises one uuid names one content, and may omit data
        the engine holds. The tag keeps a uuid from ever naming a content hash — a
        client that sends another item's content hash as its uuid gets an identifier
        of its own, not that item's cache entry."""
        if uuid is None:
            if data is None:
                raise InvalidInputError("an item needs its data or a uuid")
            return self.hash_item(data, options)
        if not isinstance(uuid, str) or not uuid:
            raise InvalidInputError(f"a uuid must be a non-empty str, got {uuid!r}")
        return _digest(_TAG_UUID, serialize(uuid), options)


def _digest(tag: bytes, named: bytes, options: Mapping[str, HashInput] | None) -> str:
    """sha256 of the framed pair of what names the item (its data, or its uuid) and the
    processor options; ``None`` is no options, as ``{}`` (HASH-5)."""
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise InvalidInputError(
            f"options must be a mapping of str to values, got {type(options).__name__}"
        )
    return hashlib.sha256(frame(tag, named + _serialize_mapping(options))).hexdigest()


class FeatureHasher:
    """sha256 of a framed processed feature (``spec.components.FeatureHasher``): one
    array, or a list (any sequence) of arrays, each with its dtype, shape and bytes."""

    def feature_identity(self, feature: ProcessedFeature) -> str:
        if isinstance(feature, np.ndarray):
            body = _serialize_array(feature)
        elif isinstance(feature, Sequence) and not isinstance(feature, (str, bytes)):
            arrays = list(feature)
            for array in arrays:
                if not isinstance(array, np.ndarray):
                    raise InvalidInputError(
                        "a processed feature is an array or a list of arrays, "
                        f"not a list holding a {type(array).__name__}"
                    )
            body = serialize(arrays)
        else:
            raise InvalidInputError(
                "a processed feature is an array or a list of arrays, "
                f"not a {type(feature).__name__}"
            )
        return hashlib.sha256(frame(_TAG_FEATURE, body)).hexdigest()

    def feature_identifier(self, feature: ProcessedFeature, client_hash: str | None) -> str:
        """The feature's identity without a client hash; with one, the sha256 of the
        hash framed under a tag of its own, so that no client hash names content
        (HASH-11)."""
        if client_hash is None:
            return self.feature_identity(feature)
        if not isinstance(client_hash, str):
            raise InvalidInputError(f"a client hash is a str, not {type(client_hash).__name__}")
        return hashlib.sha256(frame(_TAG_CLIENT_HASH, serialize(client_hash))).hexdigest()

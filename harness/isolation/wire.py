"""The plain data that crosses the pipe between the grader and the isolated child.

Only these values cross: ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``,
tuples, lists, dicts, sets, frozensets of them, and four tagged forms (a tuple whose
first element is a tag string starting with NUL):

- a numpy array: ``(ND, dtype.str, shape, layout, data bytes in C order, id)`` where the
  layout is ``"C"``, ``"F"`` (Fortran order) or the byte strides of a strided view
  (rebuilt as a view into a zeroed buffer): the receiver gets the same memory layout,
  since hashing "content, not layout" is itself a clause (HASH-1), and ``id`` is None or
  the number both sides know the array by (write-back, :mod:`.session`); a numpy scalar:
  ``(NP, dtype.str, data bytes)`` — numeric dtypes only (no object arrays);
- a dataclass of the spec (``PlaceholderRange``, ``RequestView``, ``StepOutput``, ...):
  ``(DC, class name, field values in declaration order)``, rebuilt by the receiver
  through the class's own constructor, so its validation runs again;
- a ``range``: ``(RANGE, start, stop, step)`` (properties hand one to a processor on
  purpose: a prompt that is not a list or tuple must be refused, EXP-4, so arguments
  cross as they are, never normalised);
- a component handle: ``(HANDLE, number)``; and a user tuple that happens to start with
  a tag-like string: ``(ESCAPED, items)``.

A frame is a 4-byte big-endian length and a pickle of such data, written without the
pickle memo (no object is referenced twice). The receiver unpickles with
:class:`PlainUnpickler`, which refuses every ``find_class`` (the only way a pickle
constructs an object of a class other than the builtin containers and scalars), so the
child can never make the grader build, import or call anything; it then refuses a frame
whose containers are shared (memo references: ``x = [x, x]`` sixty deep is a 541-byte
frame and a 2**60-leaf tree for a decoder), nested deeper than :data:`MAX_DEPTH`, or
holding more values than its size allows (:func:`_check_tree`, linear in the frame's
size). What arrives is a small tree of inert data, decoded by :func:`from_wire` with
explicit whitelists.

:func:`to_wire` is used on both sides. Subclasses of builtins (in the child: whatever
the code under test returned) are reduced to their exact builtin type through
the builtin's own slot (``int.__int__``, ``str.__str__``, ...), so an ``int`` whose
``__eq__`` always says True arrives as a plain ``int``; any other object is a
:class:`WireError` ("cannot cross the isolation boundary").

Over 400 lines (426) because the one codec of the socket: every type that may cross it,
encoder and decoder side by side, so that the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import io
import pickle
import socket
import struct
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from spec import components as _components
from spec import types as _types

ND = "\x00nd"
NP = "\x00np"
DC = "\x00dc"
HANDLE = "\x00h"
ESCAPED = "\x00tuple"
RANGE = "\x00range"
NPTEXT = "\x00nptext"

#: numpy dtype kinds that may cross: bool, signed/unsigned ints, floats, complex.
NUMERIC_KINDS = frozenset("biufc")

#: The largest frame either side accepts; the grader bounds the child's replies far
#: lower (``Limits.reply_bytes``).
MAX_FRAME = 512 * 1024 * 1024
#: How deep a frame's containers may nest (what crosses is a few levels deep).
MAX_DEPTH = 64
#: How many values a frame may hold per byte of its pickle: every value costs at least
#: one opcode byte once nothing is shared, so this refuses only forged frames.
VALUES_PER_BYTE = 2

_HEADER = struct.Struct(">I")


class WireError(Exception):
    """A value cannot be sent, or a received frame is not valid plain data."""


class FrameTooLarge(WireError):
    """A frame's header announces more bytes than the receiver accepts."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} bytes announced")
        self.size = size
        self.limit = limit


def _spec_dataclasses() -> dict[str, type]:
    found: dict[str, type] = {}
    for module in (_types, _components):
        for name, value in vars(module).items():
            if isinstance(value, type) and dataclasses.is_dataclass(value):
                if value.__module__ == module.__name__:
                    found[name] = value
    return found


#: Every dataclass that spec/types.py and spec/components.py define, by name.
SPEC_DATACLASSES: dict[str, type] = _spec_dataclasses()
_DATACLASS_NAMES: dict[type, str] = {cls: name for name, cls in SPEC_DATACLASSES.items()}
_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in SPEC_DATACLASSES.values()
}

_SCALARS = (type(None), bool, int, float, str, bytes)


# --- encoding ----------------------------------------------------------------------------


def to_wire(
    value: object,
    *,
    handle_of: Callable[[object], int | None] | None = None,
    on_array: Callable[[np.ndarray[Any, Any]], int] | None = None,
) -> Any:
    """``value`` as plain data (see the module docstring). ``handle_of`` maps a
    component object to its handle number (None: not a component); ``on_array`` gives
    an array the number the other side will know it by (see :mod:`.session`, write-back)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is tuple or kind is list:
        items: Any = value
        if all(type(x) in _SCALARS for x in items):
            if kind is tuple and items and type(items[0]) is str and items[0][:1] == "\x00":
                return (ESCAPED, items)
            return value
    return _encode(value, handle_of, on_array)


def _encode(
    value: Any,
    handle_of: Callable[[object], int | None] | None,
    on_array: Callable[[np.ndarray[Any, Any]], int] | None,
) -> Any:
    def again(item: object) -> Any:
        return to_wire(item, handle_of=handle_of, on_array=on_array)

    if handle_of is not None:
        handle = handle_of(value)
        if handle is not None:
            return (HANDLE, handle)
    if isinstance(value, np.ndarray):
        array = np.asarray(value)
        if array.dtype.kind not in NUMERIC_KINDS:
            raise WireError(f"an array of dtype {array.dtype} cannot cross (numeric only)")
        shape = tuple(int(n) for n in array.shape)
        ident = on_array(array) if on_array is not None else None
        return (ND, array.dtype.str, shape, _layout(array), array.tobytes(), ident)
    if isinstance(value, np.str_):
        return (NPTEXT, str.__str__(value))
    if isinstance(value, np.bytes_):
        return (NPTEXT, bytes.__bytes__(value))
    if isinstance(value, np.generic):
        scalar = np.asarray(value)
        if scalar.dtype.kind not in NUMERIC_KINDS:
            raise WireError(f"a numpy scalar of dtype {scalar.dtype} cannot cross")
        return (NP, scalar.dtype.str, scalar.tobytes())
    if isinstance(value, range):  # range cannot be subclassed
        return (RANGE, value.start, value.stop, value.step)
    base = _spec_base(type(value))
    if base is not None:
        return (DC, _DATACLASS_NAMES[base], tuple(again(getattr(value, f)) for f in _FIELDS[base]))
    # Subclasses of builtins: reduced through the builtin's own slot, never the
    # subclass's overrides (a lying __eq__ or __hash__ does not survive the crossing).
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bytes):
        return bytes.__bytes__(value)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, tuple):
        items = tuple(again(x) for x in tuple.__iter__(value))
        if items and type(items[0]) is str and items[0][:1] == "\x00":
            return (ESCAPED, items)
        return items
    if isinstance(value, list):
        return [again(x) for x in list.__iter__(value)]
    if isinstance(value, OrderedDict):
        return {again(k): again(v) for k, v in OrderedDict.items(value)}
    if isinstance(value, dict):
        return {again(k): again(v) for k, v in dict.items(value)}
    if isinstance(value, frozenset):
        return frozenset(again(x) for x in frozenset.__iter__(value))
    if isinstance(value, set):
        return {again(x) for x in set.__iter__(value)}
    if isinstance(value, Mapping):
        return {again(k): again(v) for k, v in value.items()}
    raise WireError(
        f"a {type(value).__module__}.{type(value).__qualname__} cannot cross the isolation "
        "boundary (plain data, numpy arrays and the spec's dataclasses only)"
    )


def _layout(array: np.ndarray[Any, Any]) -> str | tuple[int, ...]:
    if array.flags.c_contiguous or array.size == 0:
        return "C"
    if array.flags.f_contiguous:
        return "F"
    if all(s >= 0 for s in array.strides):
        return tuple(int(s) for s in array.strides)
    return "C"  # negative strides: sent as a C-order copy


def _relaid(array: np.ndarray[Any, Any], layout: object) -> np.ndarray[Any, Any]:
    """``array`` (C order) in ``layout``."""
    if layout == "C":
        return array
    if layout == "F":
        return np.asfortranarray(array)
    shape = array.shape
    if (
        type(layout) is not tuple
        or len(layout) != len(shape)
        or not all(type(s) is int and s >= 0 for s in layout)
    ):
        raise WireError(f"bad array layout {layout!r}")
    span = sum((n - 1) * s for n, s in zip(shape, layout, strict=True)) + array.itemsize
    if span > MAX_FRAME:
        raise WireError(f"an array layout spanning {span} bytes")
    try:
        out: np.ndarray[Any, Any] = np.ndarray(
            shape, dtype=array.dtype, buffer=bytearray(span), strides=layout
        )
    except (TypeError, ValueError) as e:
        raise WireError(f"bad array layout {layout!r}: {e}") from e
    out[...] = array
    return out


def _spec_base(kind: type) -> type | None:
    for klass in kind.__mro__:
        if klass in _DATACLASS_NAMES:
            return klass
    return None


# --- decoding ----------------------------------------------------------------------------


def from_wire(
    data: Any,
    resolve_handle: Callable[[int], object] | None = None,
    on_array: Callable[[int, np.ndarray[Any, Any]], None] | None = None,
) -> Any:
    """Rebuild a value from plain data; raises :class:`WireError` for anything that is
    not what :func:`to_wire` makes (an unknown tag or dataclass, a non-numeric dtype,
    a size that does not match the shape)."""
    kind = type(data)
    if kind in _SCALARS:
        return data
    if kind is tuple:
        if data and type(data[0]) is str and data[0][:1] == "\x00":
            return _tagged(data, resolve_handle, on_array)
        if all(type(x) in _SCALARS for x in data):
            return data
        return tuple(from_wire(x, resolve_handle, on_array) for x in data)
    if kind is list:
        if all(type(x) in _SCALARS for x in data):
            return data
        return [from_wire(x, resolve_handle, on_array) for x in data]
    if kind is dict:
        return {
            from_wire(k, resolve_handle, on_array): from_wire(v, resolve_handle, on_array)
            for k, v in data.items()
        }
    if kind is frozenset:
        return frozenset(from_wire(x, resolve_handle, on_array) for x in data)
    if kind is set:
        return {from_wire(x, resolve_handle, on_array) for x in data}
    raise WireError(f"unexpected {kind.__name__} in a frame")


def _tagged(
    data: tuple[Any, ...],
    resolve_handle: Callable[[int], object] | None,
    on_array: Callable[[int, np.ndarray[Any, Any]], None] | None,
) -> Any:
    tag = data[0]
    if tag == ESCAPED and len(data) == 2 and type(data[1]) is tuple:
        return tuple(from_wire(x, resolve_handle, on_array) for x in data[1])
    if tag == ND and len(data) == 6:
        _tag, dtype_str, shape, layout, raw, ident = data
        dtype = _numeric_dtype(dtype_str)
        if type(shape) is not tuple or not all(type(n) is int and n >= 0 for n in shape):
            raise WireError(f"bad array shape {shape!r}")
        if type(raw) is not bytes or len(raw) != int(np.prod(shape)) * dtype.itemsize:
            raise WireError(f"array data does not match shape {shape} of {dtype}")
        array = _relaid(np.frombuffer(raw, dtype=dtype).reshape(shape).copy(), layout)
        if on_array is not None and type(ident) is int:
            on_array(ident, array)
        return array
    if tag == NP and len(data) == 3:
        dtype = _numeric_dtype(data[1])
        if type(data[2]) is not bytes or len(data[2]) != dtype.itemsize:
            raise WireError("numpy scalar data does not match its dtype")
        return np.frombuffer(data[2], dtype=dtype)[0]
    if tag == DC and len(data) == 3:
        cls = SPEC_DATACLASSES.get(data[1]) if type(data[1]) is str else None
        if cls is None or type(data[2]) is not tuple or len(data[2]) != len(_FIELDS[cls]):
            raise WireError(f"not a dataclass of the spec: {data[1]!r}")
        return cls(*(from_wire(x, resolve_handle, on_array) for x in data[2]))
    if tag == NPTEXT and len(data) == 2 and type(data[1]) in (str, bytes):
        return np.str_(data[1]) if type(data[1]) is str else np.bytes_(data[1])
    if tag == RANGE and len(data) == 4 and all(type(x) is int for x in data[1:]) and data[3]:
        return range(data[1], data[2], data[3])
    if tag == HANDLE and len(data) == 2 and type(data[1]) is int and resolve_handle:
        return resolve_handle(data[1])
    raise WireError(f"unknown tagged value {tag!r}")


def _numeric_dtype(dtype_str: object) -> np.dtype[Any]:
    if type(dtype_str) is not str or len(dtype_str) > 8:
        raise WireError(f"bad dtype {dtype_str!r}")
    try:
        dtype = np.dtype(dtype_str)
    except TypeError as e:
        raise WireError(f"bad dtype {dtype_str!r}") from e
    if dtype.kind not in NUMERIC_KINDS or dtype.hasobject:
        raise WireError(f"dtype {dtype} may not cross (numeric only)")
    return dtype


# --- framing -----------------------------------------------------------------------------


class PlainUnpickler(pickle.Unpickler):
    """Unpickles builtin scalars and containers only: every class lookup is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise WireError(f"a frame may not name a class ({module}.{name})")


def encode_frame(message: object) -> bytes:
    """One frame: its length, then its pickle, written without the memo (nothing is
    shared, so the receiver may refuse every shared container)."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True  # no memo: a value referenced twice is written twice
    pickler.dump(message)
    payload = buffer.getvalue()
    return _HEADER.pack(len(payload)) + payload


def send(sock: socket.socket, message: object) -> None:
    """Write one frame."""
    sock.sendall(encode_frame(message))


def decode_frame(payload: bytes) -> Any:
    """Unpickle one frame's payload with :class:`PlainUnpickler`, and refuse it unless
    it is a small tree (:func:`_check_tree`)."""
    try:
        value = PlainUnpickler(io.BytesIO(payload)).load()
    except WireError:
        raise
    except Exception as e:  # noqa: BLE001 - any malformed pickle is a wire error
        raise WireError(f"malformed frame: {type(e).__name__}: {e}") from e
    _check_tree(value, VALUES_PER_BYTE * len(payload) + 16)
    return value


_CONTAINERS_SET: frozenset[type] = frozenset({tuple, list, dict, set, frozenset})


def _check_tree(value: object, budget: int) -> None:
    """Refuse ``value`` unless it is a tree of at most ``budget`` values, nested at
    most :data:`MAX_DEPTH` deep: a container met twice came from a memo reference,
    which :func:`encode_frame` never writes. Visits each value once, so it costs what
    the frame's size allows and no more."""
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise WireError("a frame holds more values than its size allows")
        if type(item) not in _CONTAINERS_SET or not item:
            continue  # a scalar, or an empty container (the empty tuple is shared)
        if id(item) in seen:
            raise WireError("a frame may not share a container (a pickle memo reference)")
        seen.add(id(item))
        if depth >= MAX_DEPTH:
            raise WireError(f"a frame nested more than {MAX_DEPTH} deep")
        children: Any = (
            [part for pair in dict.items(item) for part in pair] if type(item) is dict else item
        )
        if _CONTAINERS_SET.isdisjoint(map(type, children)):
            budget -= len(children)  # scalars only (token ids, bytes): counted at C speed
            continue
        stack.extend((child, depth + 1) for child in children)


def recv_exact(sock: socket.socket, size: int) -> bytes:
    """Read exactly ``size`` bytes (blocking); ``EOFError`` when the peer is gone."""
    chunks: list[bytes] = []
    left = size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def frame_size(header: bytes, limit: int = MAX_FRAME) -> int:
    """The size the header announces; a :class:`WireError` beyond ``limit`` (read
    before any of the frame is, so a huge reply costs the receiver nothing)."""
    (size,) = _HEADER.unpack(header)
    if size > limit:
        raise FrameTooLarge(size, limit)
    return int(size)


HEADER_SIZE = _HEADER.size

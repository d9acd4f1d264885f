"""The plain data that crosses the pipe between the grader and the isolated child.

Only these values cross: ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``,
tuples and lists of them, dicts, sets and frozensets keyed by strings, and these tagged
forms (a tuple whose first element is a tag string starting with NUL):

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
- a dict, set or frozenset whose keys are not all strings: ``(DICT, keys, values)``,
  ``(SET, items)``, ``(FROZENSET, items)``: ints, floats and tuples hash alike in every
  process (strings with a salt of its own), so a sender could choose keys that collide,
  and the receiver counts their hashes before it builds the container (:func:`_distinct`);
- a component the child holds: ``(HANDLE, number)`` from the grader, ``(HANDLE, number,
  component, extension members)`` from the child (in a callback's arguments: the grader
  makes a proxy of it); a component the grader holds (a stand-in of the reference, which
  never enters the child): ``(HELD, number, component, extension members)``, both ways
  (:mod:`.standins`); and a user tuple that happens to start with a tag-like string:
  ``(ESCAPED, items)``.

A frame is a 4-byte big-endian length and a pickle of such data, written without the
pickle memo (no object is referenced twice). The receiver checks the pickle before it
builds anything (:func:`check_frame`: one pass over its opcodes, linear in its length):
only the opcodes of plain data, so no class is named (the only way a pickle constructs
an object other than the builtin containers and scalars: the child can never make the
grader build, import or call anything); no memo reference and no ``DUP``, so no value
is shared (``x = (x, x)`` sixty deep is a 131-byte frame and a 2**60-leaf tree, which
pickle would hash as a set's item, for ever); containers nested at most
:data:`MAX_DEPTH` deep; nothing hashed but strings. Only then does it unpickle, with
:class:`PlainUnpickler`, which refuses every ``find_class`` all the same. What arrives
is a small tree of inert data, decoded by :func:`from_wire` with explicit whitelists.

:func:`to_wire` is used on both sides. Subclasses of builtins (in the child: whatever
the code under test returned) are reduced to their exact builtin type through
the builtin's own slot (``int.__int__``, ``str.__str__``, ...), so an ``int`` whose
``__eq__`` always says True arrives as a plain ``int``; any other object is a
:class:`WireError` ("cannot cross the isolation boundary").

Over 400 lines (642) because the one codec of the socket: every type that may cross it,
encoder, decoder and the check of a frame's opcodes side by side, so that they cannot
drift apart.
"""

from __future__ import annotations

import dataclasses
import io
import pickle
import pickletools
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
HELD = "\x00held"
ESCAPED = "\x00tuple"
RANGE = "\x00range"
NPTEXT = "\x00nptext"
DICT = "\x00dict"
SET = "\x00set"
FROZENSET = "\x00frozenset"

#: numpy dtype kinds that may cross: bool, signed/unsigned ints, floats, complex.
NUMERIC_KINDS = frozenset("biufc")

#: The largest frame either side accepts; the grader bounds the child's replies far
#: lower (``Limits.reply_bytes``).
MAX_FRAME = 512 * 1024 * 1024
#: How deep a frame's containers may nest (what crosses is a few levels deep).
MAX_DEPTH = 64

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
    handle_of: Callable[[object], int | tuple[Any, ...] | None] | None = None,
    on_array: Callable[[np.ndarray[Any, Any]], int] | None = None,
) -> Any:
    """``value`` as plain data (see the module docstring). ``handle_of`` maps a
    component object to its handle number, or to its whole tagged form (``HANDLE`` or
    ``HELD``; None: not a component); ``on_array`` gives
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
    handle_of: Callable[[object], int | tuple[Any, ...] | None] | None,
    on_array: Callable[[np.ndarray[Any, Any]], int] | None,
) -> Any:
    def again(item: object) -> Any:
        return to_wire(item, handle_of=handle_of, on_array=on_array)

    if handle_of is not None:
        handle = handle_of(value)
        if type(handle) is int:
            return (HANDLE, handle)
        if handle is not None:
            return handle
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
        return _dict([(again(k), again(v)) for k, v in OrderedDict.items(value)])
    if isinstance(value, dict):
        return _dict([(again(k), again(v)) for k, v in dict.items(value)])
    if isinstance(value, frozenset):
        return _set(FROZENSET, [again(x) for x in frozenset.__iter__(value)])
    if isinstance(value, set):
        return _set(SET, [again(x) for x in set.__iter__(value)])
    if isinstance(value, Mapping):
        return _dict([(again(k), again(v)) for k, v in value.items()])
    raise WireError(
        f"a {type(value).__module__}.{type(value).__qualname__} cannot cross the isolation "
        "boundary (plain data, numpy arrays and the spec's dataclasses only)"
    )


def _dict(pairs: list[tuple[Any, Any]]) -> Any:
    """A dict keyed by strings crosses as itself (their hashes are salted per process, so
    a sender cannot make them collide); any other as ``(DICT, keys, values)``, whose keys
    the receiver checks before it hashes them (:func:`_distinct`)."""
    if all(type(k) is str for k, _v in pairs):
        return dict(pairs)
    return (DICT, tuple(k for k, _v in pairs), tuple(v for _k, v in pairs))


def _set(tag: str, items: list[Any]) -> Any:
    """A set or frozenset of strings crosses as itself; any other as ``(tag, items)``
    (as :func:`_dict`)."""
    if all(type(x) is str for x in items):
        return frozenset(items) if tag == FROZENSET else set(items)
    return (tag, tuple(items))


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
    resolve_handle: Callable[[Any], object] | None = None,
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
    resolve_handle: Callable[[Any], object] | None,
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
    if tag == DICT and len(data) == 3 and type(data[1]) is type(data[2]) is tuple:
        if len(data[1]) != len(data[2]):
            raise WireError("a dict's keys and values do not pair up")
        keys = _distinct([from_wire(k, resolve_handle, on_array) for k in data[1]])
        values = (from_wire(v, resolve_handle, on_array) for v in data[2])
        return dict(zip(keys, values, strict=True))
    if tag in (SET, FROZENSET) and len(data) == 2 and type(data[1]) is tuple:
        items = _distinct([from_wire(x, resolve_handle, on_array) for x in data[1]])
        return set(items) if tag == SET else frozenset(items)
    if tag == RANGE and len(data) == 4 and all(type(x) is int for x in data[1:]) and data[3]:
        return range(data[1], data[2], data[3])
    if tag == HANDLE and len(data) == 2 and type(data[1]) is int and resolve_handle:
        return resolve_handle(data[1])
    if tag in (HANDLE, HELD) and len(data) == 4 and resolve_handle and _is_reference(data):
        return resolve_handle(data)
    raise WireError(f"unknown tagged value {tag!r}")


def _is_reference(data: tuple[Any, ...]) -> bool:
    """Whether a 4-tuple ``HANDLE``/``HELD`` is well formed: a number, a component name
    and a tuple of member names (checked against the Protocols by the resolver)."""
    return (
        type(data[1]) is int
        and type(data[2]) is str
        and type(data[3]) is tuple
        and all(type(name) is str for name in data[3])
    )


#: How many different keys of one set or dict may share a hash. Ints, floats and tuples
#: hash the same in every process, so a sender can choose any number that collide, and
#: a set of them takes time quadratic in their number to build (pickle took 26 s for
#: 50,000 ints, a 0.6 MB frame; 200,000 would take some seven minutes).
MAX_SAME_HASH = 8


def _distinct(keys: list[Any]) -> list[Any]:
    """``keys``, once no more than :data:`MAX_SAME_HASH` different ones share a hash:
    at most that many comparisons per key, in a dict keyed by the hash values (which it
    cannot flood in turn: at most five hash values share a hash of their own)."""
    by_hash: dict[int, list[Any]] = {}
    for key in keys:
        try:
            same = by_hash.setdefault(hash(key), [])
        except TypeError as e:  # an array as a key
            raise WireError(f"an unhashable key: {e}") from None
        if key not in same:
            if len(same) == MAX_SAME_HASH:
                raise WireError(f"more than {MAX_SAME_HASH} keys of a set or dict share a hash")
            same.append(key)
    return keys


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
    """Check one frame's payload (:func:`check_frame`), then unpickle it with
    :class:`PlainUnpickler`."""
    check_frame(payload)
    try:
        return PlainUnpickler(io.BytesIO(payload)).load()
    except WireError:
        raise
    except Exception as e:  # noqa: BLE001 - any malformed pickle is a wire error
        raise WireError(f"malformed frame: {type(e).__name__}: {e}") from e


# What check_frame knows of each value on the pickle's stack, as one int: its kind, and
# how deep its containers nest (times _LEVEL). _SEALED: a tuple or a frozenset.
_SCALAR, _TEXT, _LIST, _DICT, _SET, _SEALED = range(6)
_LEVEL = 8

# What each opcode is to check_frame (_ACTION[opcode]); the scalars, by far the most
# opcodes of a frame, are numbers that also say how to step over their argument.
_OTHER, _MARK, _TAKE, _EMPTY, _FRAME, _STOP = range(6)
_BYTES = 16  # + the size of the length its data follows (bytes, long int)
_STR = 32  # + the same, for a str
_FIXED = 64  # + the size of its argument

#: The opcodes that take values off the stack, to add them to the container below or to
#: build one: how many they take (0: all above the last MARK, and the MARK), the kind
#: of container, and which of the values it hashes (0: none, 1: all, 2: every other).
_TAKES = {
    pickle.APPEND[0]: (1, _LIST, 0), pickle.APPENDS[0]: (0, _LIST, 0),
    pickle.SETITEM[0]: (2, _DICT, 2), pickle.SETITEMS[0]: (0, _DICT, 2),
    pickle.ADDITEMS[0]: (0, _SET, 1), pickle.FROZENSET[0]: (0, _SEALED, 1),
    pickle.TUPLE1[0]: (1, _SEALED, 0), pickle.TUPLE2[0]: (2, _SEALED, 0),
    pickle.TUPLE3[0]: (3, _SEALED, 0), pickle.TUPLE[0]: (0, _SEALED, 0),
}
_EMPTIES = {pickle.EMPTY_LIST[0]: _LIST, pickle.EMPTY_DICT[0]: _DICT, pickle.EMPTY_SET[0]: _SET}


def _actions() -> bytes:
    action = bytearray(256)  # _OTHER unless listed
    for ops, what in [
        ((pickle.NONE, pickle.NEWTRUE, pickle.NEWFALSE, pickle.EMPTY_TUPLE), _FIXED),
        ((pickle.BININT1,), _FIXED + 1), ((pickle.BININT2,), _FIXED + 2),
        ((pickle.BININT,), _FIXED + 4), ((pickle.BINFLOAT,), _FIXED + 8),
        ((pickle.LONG1, pickle.SHORT_BINBYTES), _BYTES + 1),
        ((pickle.LONG4, pickle.BINBYTES), _BYTES + 4), ((pickle.BINBYTES8,), _BYTES + 8),
        ((pickle.SHORT_BINUNICODE,), _STR + 1), ((pickle.BINUNICODE,), _STR + 4),
        ((pickle.BINUNICODE8,), _STR + 8),
        ((pickle.MARK,), _MARK), ((pickle.FRAME,), _FRAME), ((pickle.STOP,), _STOP),
    ]:
        for op in ops:
            action[op[0]] = what
    for code in _TAKES:
        action[code] = _TAKE
    for code in _EMPTIES:
        action[code] = _EMPTY
    return bytes(action)


_ACTION = _actions()
#: Opcodes that encode_frame never writes but that build nothing: memo writes and POPs.
#: They are refused once the whole frame is read, so that a frame is refused for the
#: worst it holds (a class it names, a value it shares). Value: the size of the
#: argument (PUT's is a line), or what a POP takes off the stack (as _TAKES).
_INERT = {
    pickle.MEMOIZE[0]: 0, pickle.BINPUT[0]: 1, pickle.LONG_BINPUT[0]: 4, pickle.PUT[0]: -1,
    pickle.POP[0]: -2, pickle.POP_MARK[0]: -3,
}
_MEMO_READS = {pickle.BINGET[0], pickle.LONG_BINGET[0], pickle.GET[0]}
_NAMES = {ord(op.code): op.name for op in pickletools.opcodes}


def check_frame(payload: bytes) -> None:
    """Refuse ``payload`` unless its pickle builds a tree of plain data: only the
    opcodes :func:`encode_frame` writes for it, no class named, no memo and no ``DUP``
    (so no value is built twice over: ``x = (x, x)`` sixty deep is a 131-byte frame and
    a 2**60-leaf tree, which pickle would even hash, as a set's item), nested at most
    :data:`MAX_DEPTH` deep, and nothing hashed but strings (other keys cross tagged, see
    :func:`_dict`). Reads each opcode once and builds nothing, so it runs before anything
    is built or hashed and costs what the frame's length allows."""
    stack: list[int] = []  # one entry per value (see _LEVEL)
    marks: list[int] = []  # where each open MARK left the stack
    before = last = 0  # where the last two strings start (what a STACK_GLOBAL names)
    inert = ""  # the first opcode of _INERT met
    push, action_of, end = stack.append, _ACTION, len(payload)
    at = 2 if payload[:1] == pickle.PROTO else 0
    while at < end:
        op = payload[at]
        action = action_of[op]
        at += 1
        if action >= _FIXED:
            push(_SCALAR)
            at += action - _FIXED
        elif action >= _BYTES:
            if action >= _STR:
                before, last = last, at
                push(_TEXT)
            else:
                push(_SCALAR)
            size = action % 16
            length = payload[at] if size == 1 else int.from_bytes(payload[at : at + size], "little")
            at += size + length
        elif action == _TAKE:
            count, kind, hashes = _TAKES[op]
            if count:
                start = len(stack) - count
                if start < (marks[-1] if marks else 0):
                    raise _malformed("its stack runs out")
            elif marks:
                start = marks.pop()
            else:
                raise _malformed("no MARK to go back to")
            items = stack[start:]
            del stack[start:]
            keys = items[::2] if hashes == 2 else items if hashes else []
            if keys and keys.count(_TEXT) != len(keys):
                raise WireError("a frame may hash only strings (other keys cross tagged)")
            level = 1 + max(items, default=0) // _LEVEL
            if level > MAX_DEPTH:
                raise WireError(f"a frame nested more than {MAX_DEPTH} deep")
            if kind == _SEALED:  # a tuple or frozenset: built from the values
                push(kind + level * _LEVEL)
            elif len(stack) > (marks[-1] if marks else 0) and stack[-1] % _LEVEL == kind:
                stack[-1] = max(stack[-1], kind + level * _LEVEL)
            else:
                raise _malformed(f"{_NAMES[op]} on what is not a {_KIND_NAMES[kind]}")
        elif action == _MARK:
            marks.append(len(stack))
        elif action == _EMPTY:
            push(_EMPTIES[op] + _LEVEL)
        elif action == _FRAME:
            at += 8
        elif action == _STOP:
            if at != end or marks or len(stack) != 1:
                raise _malformed("it is not one value, then its end")
            if inert:
                raise WireError(f"a frame may not hold the pickle opcode {inert}")
            return
        elif op in _INERT:
            inert = inert or _NAMES[op]
            size = _INERT[op]
            if size >= 0:
                at += size
            elif size == -1:
                at = _line_end(payload, at)
            elif size == -2 and len(stack) > (marks[-1] if marks else 0):
                stack.pop()
            elif size == -3 and marks:
                del stack[marks.pop() :]
            else:
                raise _malformed("its stack runs out")
        else:
            raise _refused(payload, op, at, (before, last))
    raise _malformed("it ends before its STOP")


_KIND_NAMES = {_LIST: "list", _DICT: "dict", _SET: "set"}


def _refused(payload: bytes, op: int, at: int, texts: tuple[int, int]) -> WireError:
    """Why a frame may not hold the opcode ``op`` (its argument at ``at``)."""
    if op in _MEMO_READS:
        return WireError("a frame may not share a container (a pickle memo reference)")
    if op == pickle.DUP[0]:
        return WireError("a frame may not share a container (DUP)")
    if op in (pickle.GLOBAL[0], pickle.INST[0]):  # "module\nname\n"
        line = _line_end(payload, at)
        return _names_a_class(payload[at : line - 1], payload[line : _line_end(payload, line) - 1])
    if op == pickle.STACK_GLOBAL[0]:
        module, name = (_text_at(payload, start) for start in texts)
        return _names_a_class(module, name)
    if op in _NAMES:
        return WireError(f"a frame may not hold the pickle opcode {_NAMES[op]}")
    return _malformed(f"unknown opcode 0x{op:02x}")


def _text_at(payload: bytes, at: int) -> bytes:
    """The string whose length starts at ``at`` (after its opcode; 0: none)."""
    if not at:
        return b"?"
    size = _ACTION[payload[at - 1]] % 16
    length = int.from_bytes(payload[at : at + size], "little")
    return payload[at + size : at + size + length]


def _line_end(payload: bytes, at: int) -> int:
    """Where the line that starts at ``at`` ends (after its newline)."""
    newline = payload.find(b"\n", at)
    if newline < 0:
        raise _malformed("a line without its end")
    return newline + 1


def _names_a_class(module: bytes, name: bytes) -> WireError:
    shown = (module + b"." + name)[:200].decode("utf-8", "replace")
    return WireError(f"a frame may not name a class ({shown})")


def _malformed(what: str) -> WireError:
    return WireError(f"malformed frame: {what}")


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

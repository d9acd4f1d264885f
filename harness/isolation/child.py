"""The isolated child: loads the adapter, builds its components, answers calls.

Run as ``python -m harness.isolation.child FD MEMORY_BYTES CPU_SECONDS`` by the
supervisor, with ``FD`` one end of a socket pair (the only channel to the grader; the
child's stdout and stderr are files the grader shows as "submission output"). It sets
its own memory (``RLIMIT_AS``) and CPU-time (``RLIMIT_CPU``) limits, soft and hard
alike, before it imports the code under test, so that code cannot raise them again.

Requests (plain data, see :mod:`harness.isolation.wire`), each answered by one reply:

- ``("load", drops, ref, stand_ins)`` -> ``("ok", info)`` or ``("load_error", problems)``;
  ``stand_ins``: the components the grader can stand in for (the reference's; none in the
  student kit)
- ``("build", drops, component, owner, args)`` -> ``("ok", (handle, extension members))``;
  ``owner`` is ``"adapter"``; an engine loop gets ``EngineParts`` of the adapter's
  factories and, for the components it lacks, the grader's stand-ins (:mod:`.standins`:
  the reference never enters this process; its components are called back)
- ``("call", drops, handle, member, args, kwargs, writes, track)`` /
  ``("get", drops, handle, member)``
  -> ``("ok", value)``;
  ``("call_each", drops, handle, member, [args, ...])`` -> ``("ok", [reply, ...])``: the
  method called with each argument tuple in turn, each reply as a call's, stopping after
  the first that is not ``ok`` (several reads in one round trip;
  :func:`properties.framework.answers`); a build or call reply on a component whose Protocol has
  properties (the cache manager's ``cached``, ``freeable``, ...) carries a third element:
  each property read right after the call, as its own reply (the grader serves every
  read of them from there while it sends nothing to the child in between: one round
  trip instead of five per step of the cache-manager machine)
- ``("reset", drops)`` -> ``("ok", None)``: forget every component (a new property)

``drops`` lists handles the grader no longer uses. With ``track`` (calls on a worker
store, whose contract says who owns which array, WRK-3) the arrays of the arguments and
of the result are kept under the numbers they crossed with, and ``writes`` — the
grader's later writes into its copies, ``(number, new contents)`` — are written into
them before the call: the memory the two sides would share in one process. Failures reply
``("raise", type name, message, location, spec)`` — ``spec`` true for the spec's typed
errors and ``NotImplementedError``, which the grader re-raises as themselves — or
``("oom", message)`` after a ``MemoryError`` (the child then exits: its heap may be in
any state) or ``("bad", message)`` when a result cannot be converted to plain data.
Every ``BaseException`` of the code under test (``SystemExit``, ``KeyboardInterrupt``,
...) is answered like an ``Exception``: it ends the call, not the child.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import resource
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from harness.isolation import wire
from harness.isolation.extensions import extension_members, observed_properties
from harness.isolation.proxy import Proxy
from harness.isolation.standins import GraderLink, StandInChannel, component_of
from harness.names import HOME

_ROOT = HOME
#: The grader's own folders: their frames are left out of a submission's traceback.
_GRADER_FOLDERS = ("harness", "properties")

#: How many tracked arrays each side keeps (the most recent; see :mod:`.session`).
_TRACKED_ARRAYS = 64  # as harness.isolation.session.TRACKED_ARRAYS


class _Child:
    """The child's state: the adapter, the components it built, and its link to the
    stand-ins the grader holds."""

    def __init__(self, sock: socket.socket) -> None:
        self.handles: dict[int, object] = {}
        #: handle -> the Protocol properties read after each call on it
        self.observed: dict[int, tuple[str, ...]] = {}
        #: arrays that crossed in tracked calls, by number (results: negative numbers)
        self.arrays: dict[int, Any] = {}
        self.next_array = -1
        self.next_handle = 1
        self.adapter: Any = None
        #: the components the grader stands in for (the reference's), by name
        self.stand_ins: frozenset[str] = frozenset()
        self.link = GraderLink(sock, self.serve)
        self.channel = StandInChannel(self.link, self.encode, self.resolve_reference)
        #: id(object) -> handle, for the child's components handed to a stand-in
        self.handed: dict[int, int] = {}

    def resolve(self, handle: int) -> object:
        try:
            return self.handles[handle]
        except KeyError:
            raise wire.WireError(f"no component with handle {handle}") from None

    def resolve_reference(self, data: Any) -> object:
        """A handle the grader sent: one of ours, or (``HELD``) a stand-in it holds."""
        if type(data) is int:
            return self.resolve(data)
        if data[0] == wire.HELD:
            return self.channel.proxy(data)
        raise wire.WireError("the grader named one of the child's components with a reference")

    def encode(self, value: object) -> Any:
        """A callback's arguments as plain data: a stand-in as its ``HELD`` reference,
        one of the child's components as a handle with its component's name."""
        return wire.to_wire(value, handle_of=self.reference_of)

    def reference_of(self, value: object) -> tuple[Any, ...] | None:
        if isinstance(value, Proxy) and value._channel is self.channel:
            return (wire.HELD, value._handle, value._component, ())
        component = component_of(value)
        if component is None:
            return None
        handle = self.handed.get(id(value))
        if handle is None or self.handles.get(handle) is not value:
            handle = self.next_handle
            self.next_handle += 1
            self.handles[handle] = value
            self.handed[id(value)] = handle
        return (wire.HANDLE, handle, component, extension_members(component, value))

    def serve(self, request: Any) -> tuple[Any, ...]:
        """The reply to one request (never raises)."""
        try:
            return self.answer(request)
        except wire.WireError as e:
            return ("bad", str(e))
        except MemoryError as e:
            return ("oom", f"MemoryError: {e}")
        except Exception as e:  # noqa: BLE001 - a malformed request: say so, carry on
            return ("bad", f"{type(e).__name__}: {e}")

    def answer(self, request: Any) -> tuple[Any, ...]:
        self.channel.forget_reads()
        op, drops = request[0], request[1]
        for handle in drops:
            gone = self.handles.pop(handle, None)
            self.observed.pop(handle, None)
            if gone is not None and self.handed.get(id(gone)) == handle:
                del self.handed[id(gone)]
        if op == "load":
            return self.load(request[2], request[3])
        if op == "reset":
            self.handles.clear()
            self.observed.clear()
            self.arrays.clear()
            self.handed.clear()
            self.channel = StandInChannel(self.link, self.encode, self.resolve_reference)
            return ("ok", None)
        if op == "build":
            component, owner, args = request[2], request[3], request[4]
            return self.build(component, owner, wire.from_wire(args, self.resolve_reference))
        if op == "call":
            target = self.resolve(request[2])
            track = request[7] is True
            self.write_back(request[6])
            keep = self.keep_array if track else None
            args = wire.from_wire(request[4], self.resolve_reference, keep)
            kwargs = wire.from_wire(request[5], self.resolve_reference, keep)
            call = getattr(target, request[3])
            reply = self.reply(lambda: call(*args, **kwargs), self.number_array if track else None)
            return self.with_properties(reply, request[2])
        if op == "call_each":
            return self.call_each(request[2], request[3], request[4])
        if op == "get":
            target = self.resolve(request[2])
            return self.reply(lambda: getattr(target, request[3]))
        raise wire.WireError(f"unknown request {op!r}")

    def call_each(self, handle: int, member: str, each_args: Any) -> tuple[Any, ...]:
        """``member`` called with each argument tuple in turn, stopping after the first
        whose reply is not ``ok``: ``("ok", [reply, ...])`` and the properties read after
        the last call (what the properties read after each call would end on)."""
        if not isinstance(each_args, list):
            raise wire.WireError("call_each takes a list of argument tuples")
        call = getattr(self.resolve(handle), member)
        replies: list[tuple[Any, ...]] = []
        for data in each_args:
            args = wire.from_wire(data, self.resolve_reference)
            reply = self.reply(lambda args=args: call(*args))
            if reply[0] == "oom":
                return reply
            replies.append(reply)
            if reply[0] != "ok":
                break
        return self.with_properties(("ok", replies), handle)

    def load(self, ref: str, stand_ins: Any) -> tuple[Any, ...]:
        from harness.loader import AdapterLoadError, load_adapter, make_siblings_importable

        if not isinstance(stand_ins, list) or not set(stand_ins) <= set(_components()):
            raise wire.WireError("load names the stand-ins as a list of components")
        self.stand_ins = frozenset(stand_ins)
        make_siblings_importable(ref)
        try:
            loaded = load_adapter(ref)
        except AdapterLoadError as e:
            return ("load_error", list(e.problems))
        except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt, GeneratorExit, ...
            # the loader lets BaseExceptions through (in process they are the grader's):
            # here they are the submission's, and explained like any other load problem
            return ("load_error", [f"loading raised {_traceback_text(e)}"])
        self.adapter = loaded.adapter
        info = {
            "name": loaded.adapter.name,
            "module_name": loaded.module_name,
            "origin": loaded.origin,
            "identity": loaded.identity,
            "provided": [c for c in _components() if loaded.provides(c)],
            "not_attempted": sorted(str(n) for n in loaded.adapter.not_attempted),
        }
        return ("ok", info)

    def build(self, component: str, owner: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        factory = getattr(self.adapter, component, None) if owner == "adapter" else None
        if factory is None:
            raise wire.WireError(f"{owner} has no {component}")
        if component == "engine_loop":
            args = (args[0], self.engine_parts())

        handle = self.next_handle

        def make() -> tuple[int, tuple[str, ...]]:
            product = factory(*args)
            self.next_handle += 1
            self.handles[handle] = product
            extras = extension_members(component, product)
            self.observed[handle] = observed_properties(component, extras)
            return handle, extras

        return self.with_properties(self.reply(make), handle)

    def engine_parts(self) -> Any:
        """The adapter's factories for an engine loop's parts; for each it lacks, the
        grader's stand-in (built there, called back), or one that raises
        ``NotImplementedError`` when nobody provides it (as ``harness.loader.build_parts``)."""
        from spec.adapter import EngineParts

        factories: dict[str, Any] = {}
        for field in dataclasses.fields(EngineParts):
            name = field.name
            factory = getattr(self.adapter, name, None)
            if factory is None and name in self.stand_ins:
                factory = functools.partial(self._stand_in, name)
            factories[name] = factory if factory is not None else _unavailable(name)
        return EngineParts(**factories)

    def _stand_in(self, component: str, *args: Any) -> Any:
        return self.channel.build(component, args)

    def with_properties(self, reply: tuple[Any, ...], handle: int) -> tuple[Any, ...]:
        names = self.observed.get(handle, ())
        if reply[0] != "ok" or not names:
            return reply
        target = self.handles[handle]
        snapshot = {name: self.reply(lambda name=name: _read(target, name)) for name in names}
        if any(r[0] == "oom" for r in snapshot.values()):
            return ("oom", "MemoryError while reading properties")
        return (*reply, snapshot)

    def keep_array(self, number: int, array: Any) -> None:
        self.arrays[number] = array
        while len(self.arrays) > _TRACKED_ARRAYS:
            del self.arrays[next(iter(self.arrays))]

    def number_array(self, array: Any) -> int:
        number = self.next_array
        self.next_array -= 1
        self.keep_array(number, array)
        return number

    def write_back(self, writes: Any) -> None:
        for number, data in writes:
            target = self.arrays.get(number)
            value = wire.from_wire(data)
            if target is not None and target.shape == value.shape and target.flags.writeable:
                target[...] = value

    def reply(self, action: Any, number_array: Any = None) -> tuple[Any, ...]:
        try:
            value = action()
        except MemoryError as e:
            return ("oom", f"MemoryError: {e}")
        except BaseException as e:  # noqa: BLE001 - every escape of the code under test
            return _raised(e)
        try:
            # a component is not a value: returning one "cannot cross" (handle_of=None)
            return ("ok", wire.to_wire(value, on_array=number_array))
        except wire.WireError as e:
            return ("bad", str(e))
        except MemoryError as e:
            return ("oom", f"MemoryError: {e}")
        except BaseException as e:  # noqa: BLE001 - a conversion hook that raises
            return ("bad", f"converting the result raised {type(e).__name__}: {e}")


def _unavailable(component: str) -> Any:
    def factory(*_args: object) -> Any:
        raise NotImplementedError(f"no implementation provides the {component} component")

    return factory


def _read(target: object, name: str) -> object:
    """A property's value, or an observed query's answer (``"snapshot()"``: called)."""
    if name.endswith("()"):
        return getattr(target, name[:-2])()
    return getattr(target, name)


def _components() -> list[str]:
    from spec.adapter import COMPONENTS

    return [name for name, _protocol in COMPONENTS]


def _raised(error: BaseException) -> tuple[Any, ...]:
    from spec import errors

    spec_types = {
        name: value
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.SpecError)
    }
    name = type(error).__name__
    is_spec = False
    for klass in type(error).__mro__:
        if klass.__module__ == errors.__name__ and spec_types.get(klass.__name__) is klass:
            name, is_spec = klass.__name__, True
            break
        if klass is NotImplementedError:
            name, is_spec = "NotImplementedError", True
            break
    try:
        message = str(error)
    except BaseException:  # noqa: BLE001 - a __str__ that raises
        message = "(its message could not be read)"
    return ("raise", name, message, _location(error), is_spec)


def _traceback_text(error: BaseException) -> str:
    """``Type: message``, then the innermost frames of the code under test (the
    grader's and importlib's own frames left out)."""
    try:
        message = str(error)
    except BaseException:  # noqa: BLE001 - a __str__ that raises
        message = "(its message could not be read)"
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith(("<frozen", *(str(_ROOT / d) for d in _GRADER_FOLDERS)))
    ]
    shown = traceback.format_list(frames[-_TRACEBACK_FRAMES:])
    return f"{type(error).__name__}: {message}" + ("\n" + "".join(shown).rstrip() if shown else "")


#: How many frames of a load-time traceback the report shows (the innermost).
_TRACEBACK_FRAMES = 4


def _location(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    try:
        where = str(Path(last.filename).resolve().relative_to(_ROOT))
    except ValueError:
        where = last.filename
    return f"{where}:{last.lineno} in {last.name}"


def _set_limits(memory_bytes: int, cpu_seconds: int) -> None:
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    if cpu_seconds > 0:
        # SIGXCPU at the soft limit; the hard limit (SIGKILL) a second later.
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))


def main(argv: list[str]) -> int:
    fd, memory_bytes, cpu_seconds = int(argv[0]), int(argv[1]), int(argv[2])
    _set_limits(memory_bytes, cpu_seconds)
    sock = socket.socket(fileno=fd)
    child = _Child(sock)
    while True:
        try:
            header = wire.recv_exact(sock, wire.HEADER_SIZE)
            request = wire.decode_frame(wire.recv_exact(sock, wire.frame_size(header)))
        except EOFError:
            return 0
        reply = child.serve(request)
        wire.send(sock, reply)
        if reply[0] == "oom":
            os._exit(3)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The isolated child: loads the adapter, builds its components, answers calls.

Run as ``python -m harness.isolation.child FD MEMORY_BYTES CPU_SECONDS`` by the
supervisor, with ``FD`` one end of a socket pair (the only channel to the grader; the
child's stdout and stderr are files the grader shows as "submission output"). It sets
its own memory (``RLIMIT_AS``) and CPU-time (``RLIMIT_CPU``) limits, soft and hard
alike, before it imports the code under test, so that code cannot raise them again.

Requests (plain data, see :mod:`harness.isolation.wire`), each answered by one reply:

- ``("load", drops, ref, fallback_ref)`` -> ``("ok", info)`` or ``("load_error", problems)``
- ``("build", drops, component, owner, args)`` -> ``("ok", (handle, extension members))``;
  ``owner`` is ``"adapter"`` or ``"fallback"`` (the reference, for a component the
  adapter lacks but one of its components is handed, e.g. the cache manager its
  scheduling hook is given); an engine loop gets the child's own ``EngineParts``
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

import os
import resource
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from harness.isolation import wire
from harness.isolation.extensions import extension_members, observed_properties
from harness.names import HOME

_ROOT = HOME
#: The grader's own folders: their frames are left out of a submission's traceback.
_GRADER_FOLDERS = ("harness", "properties")

#: How many tracked arrays each side keeps (the most recent; see :mod:`.session`).
_TRACKED_ARRAYS = 64  # as harness.isolation.session.TRACKED_ARRAYS


class _Child:
    """The child's state: the adapter, the fallback, and the components it built."""

    def __init__(self) -> None:
        self.handles: dict[int, object] = {}
        #: handle -> the Protocol properties read after each call on it
        self.observed: dict[int, tuple[str, ...]] = {}
        #: arrays that crossed in tracked calls, by number (results: negative numbers)
        self.arrays: dict[int, Any] = {}
        self.next_array = -1
        self.next_handle = 1
        self.adapter: Any = None
        self.fallback: Any = None

    def resolve(self, handle: int) -> object:
        try:
            return self.handles[handle]
        except KeyError:
            raise wire.WireError(f"no component with handle {handle}") from None

    def answer(self, request: Any) -> tuple[Any, ...]:
        op, drops = request[0], request[1]
        for handle in drops:
            self.handles.pop(handle, None)
            self.observed.pop(handle, None)
        if op == "load":
            return self.load(request[2], request[3])
        if op == "reset":
            self.handles.clear()
            self.observed.clear()
            self.arrays.clear()
            return ("ok", None)
        if op == "build":
            component, owner, args = request[2], request[3], request[4]
            return self.build(component, owner, wire.from_wire(args, self.resolve))
        if op == "call":
            target = self.resolve(request[2])
            track = request[7] is True
            self.write_back(request[6])
            keep = self.keep_array if track else None
            args = wire.from_wire(request[4], self.resolve, keep)
            kwargs = wire.from_wire(request[5], self.resolve, keep)
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
            args = wire.from_wire(data, self.resolve)
            reply = self.reply(lambda args=args: call(*args))
            if reply[0] == "oom":
                return reply
            replies.append(reply)
            if reply[0] != "ok":
                break
        return self.with_properties(("ok", replies), handle)

    def load(self, ref: str, fallback_ref: str | None) -> tuple[Any, ...]:
        from harness.loader import AdapterLoadError, load_adapter, make_siblings_importable

        make_siblings_importable(ref)
        try:
            loaded = load_adapter(ref)
            self.fallback = load_adapter(fallback_ref).adapter if fallback_ref else None
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
        source = self.adapter if owner == "adapter" else self.fallback
        factory = getattr(source, component, None)
        if factory is None:
            raise wire.WireError(f"{owner} has no {component}")
        if component == "engine_loop":
            from harness.loader import build_parts

            engine_parts = build_parts(self.adapter, self.fallback).engine_parts()
            args = (args[0], engine_parts)

        handle = self.next_handle

        def make() -> tuple[int, tuple[str, ...]]:
            product = factory(*args)
            self.next_handle += 1
            self.handles[handle] = product
            extras = extension_members(component, product)
            self.observed[handle] = observed_properties(component, extras)
            return handle, extras

        return self.with_properties(self.reply(make), handle)

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
    child = _Child()
    while True:
        try:
            header = wire.recv_exact(sock, wire.HEADER_SIZE)
            request = wire.decode_frame(wire.recv_exact(sock, wire.frame_size(header)))
        except EOFError:
            return 0
        try:
            reply = child.answer(request)
        except wire.WireError as e:
            reply = ("bad", str(e))
        except MemoryError as e:
            reply = ("oom", f"MemoryError: {e}")
        except Exception as e:  # noqa: BLE001 - a malformed request: say so, carry on
            reply = ("bad", f"{type(e).__name__}: {e}")
        wire.send(sock, reply)
        if reply[0] == "oom":
            os._exit(3)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Stand-ins that never enter the child: the reference's components, held by the grader.

A composition can hand the submission a component it does not provide: the scheduling
hook is given a cache manager, an engine loop its ``EngineParts``. Where the submission
lacks one, the reference stands in. Built inside the child, the stand-in would put the
reference — the answer key — in the submission's process: ``import reference`` would
work there, and a submission could be graded on the reference's code (issue 32). So the
grader builds every stand-in in its own process and hands the child a reference to it,
``(HELD, number, component, extension members)`` (:mod:`.wire`); the child makes a proxy
of it (the grader's own proxy classes, :func:`.proxy.proxy_class`, over a
:class:`StandInChannel`), whose calls come back to the grader as *callbacks* while the
grader waits for the child's reply:

- child -> grader ``("callback", "build", component, args)``: a stand-in built for the
  child (an engine loop's part), answered with its ``HELD`` reference;
- ``("callback", "call", number, member, args, kwargs)`` / ``("callback", "get",
  number, member)``: a member of the component's Protocol (or of an extension Protocol
  the object meets) and nothing else, on an object the grader handed out;
- grader -> child ``("callback_reply", reply)``, the reply shaped as the child's own
  (``("ok", value)``, ``("raise", ...)``, ``("bad", message)``). The reply to a read (a
  property, or a query: :data:`STAND_IN_READS`) is ``("ok", value, reads)``: ``reads``
  holds the reads the child has asked before of the stand-ins it used last
  (:data:`RECENT_STAND_INS`), as they are now, and the child answers the reads that
  follow from it until it sends the grader anything or gets a request (an engine's
  ``snapshot`` reads four members of three parts in a row: one round trip, not four).
  Nothing else changes them: the grader runs only while the child waits on it, and the
  reference's reads only read.

A stand-in's method may be handed one of the child's components (the reference's
scheduling hook, standing in beside the submission's engine loop and cache manager, is
given that cache manager): it crosses as ``(HANDLE, number, component, extension
members)`` and the grader calls it through an ordinary proxy, a request the child answers
while it waits for its callback's reply (:meth:`GraderLink.callback`). With the child
running as a user of its own (``--sandbox-user``, the autograder's default), setup.sh
makes ``reference/`` and the models unreadable to that user: the submission can neither
import nor read them.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import socket
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.isolation import wire
from harness.isolation.extensions import (
    extension_members,
    extension_protocols,
    observed_properties,
    query_name,
)
from harness.isolation.proxy import Proxy, proxy_class, rebuilt_error
from harness.loader import protocol_members
from spec.adapter import COMPONENTS, EngineParts

if TYPE_CHECKING:
    from harness.isolation.proxy import Check

_PROTOCOLS: dict[str, type] = dict(COMPONENTS)
#: The components the child may ask the grader to build: an engine loop's parts.
_PARTS = frozenset(f.name for f in dataclasses.fields(EngineParts))

#: Values that are data, never a component (checked before a component is looked for).
_DATA = (np.ndarray, np.generic, str, bytes, int, float, bool, tuple, list, dict, set,
         frozenset, range, type(None))


def component_of(value: object) -> str | None:
    """The first component (in :data:`spec.adapter.COMPONENTS` order) whose Protocol
    ``value`` meets, or None for data and anything else."""
    if isinstance(value, _DATA) or dataclasses.is_dataclass(value):
        return None
    for name, protocol in COMPONENTS:
        if isinstance(value, protocol):
            return name
    return None


@functools.cache
def _members(component: str, extras: tuple[str, ...]) -> Mapping[str, Any]:
    """The members a reference to ``component`` with ``extras`` may use (once per pair:
    asked on every call a stand-in serves; callers only read it)."""
    members = dict(protocol_members(_PROTOCOLS[component]))
    for extension in extension_protocols(component):
        members |= {n: d for n, d in protocol_members(extension).items() if n in extras}
    return MappingProxyType(members)


#: How many stand-ins' reads a reply carries (an engine's parts have three with reads).
RECENT_STAND_INS = 3

#: The reference's queries (methods without arguments that only read state) sent along
#: with every read, beside its properties and :data:`.extensions.OBSERVED_QUERIES`.
STAND_IN_READS: dict[str, tuple[str, ...]] = {"worker_store": ("held_hashes",)}


@functools.cache
def _reads(component: str, extras: tuple[str, ...]) -> tuple[str, ...]:
    """What a stand-in of ``component`` with ``extras`` answers along with a read: its
    properties and its queries (as :func:`.extensions.query_name`)."""
    declared = _members(component, extras)
    queries = [query_name(q) for q in STAND_IN_READS.get(component, ()) if q in declared]
    return (*observed_properties(component, extras), *queries)


@functools.cache
def _extension_members(component: str) -> frozenset[str]:
    return frozenset(n for p in extension_protocols(component) for n in protocol_members(p))


def _valid_reference(data: tuple[Any, ...]) -> tuple[int, str, tuple[str, ...]]:
    """A ``HANDLE``/``HELD`` reference's number, component and extension members, once
    they name a component and members its extension Protocols declare."""
    number, component, extras = data[1], data[2], data[3]
    if component not in _PROTOCOLS:
        raise wire.WireError(f"no component named {component!r}")
    if not set(extras) <= _extension_members(component):
        raise wire.WireError(f"{component} has no extension members {sorted(extras)}")
    return number, component, extras


# --- the grader's side ---------------------------------------------------------------------


class StandIns:
    """The stand-ins one isolated session's grader holds for its child, by number."""

    def __init__(self, factories: dict[str, Callable[..., Any]]) -> None:
        #: component -> the reference's factory, for the components the adapter lacks
        self.factories = factories
        self._objects: dict[int, tuple[object, str, tuple[str, ...]]] = {}
        self._numbers: dict[int, int] = {}  # id(object) -> number
        #: id(object) -> (a weak reference to it, or itself, component): every stand-in
        #: built this property, most never handed out (weak: an engine's parts hold
        #: arrays, and a property builds hundreds)
        self._components: dict[int, tuple[Callable[[], object], str]] = {}
        #: the child's components handed to a stand-in, as proxies (by child handle)
        self._child_proxies: dict[int, Proxy] = {}
        #: the stand-ins with reads the child used or had built last, oldest first (a
        #: property builds hundreds of engines; a reply carries the current one's reads)
        self._recent: dict[int, None] = {}
        #: (component, read) the child has asked for: the reads a reply carries (an
        #: engine's snapshot reads 4 of its parts' 28)
        self._asked: set[tuple[str, str]] = set()

    def clear(self) -> None:
        """Forget every stand-in (a new property, or a new child)."""
        self._objects.clear()
        self._numbers.clear()
        self._components.clear()
        self._child_proxies.clear()
        self._recent.clear()
        self._asked.clear()

    def tracked(self, component: str, factory: Callable[..., Any]) -> Callable[..., Any]:
        """``factory``, its products known as stand-ins of ``component``."""

        def build(*args: Any) -> Any:
            product = factory(*args)
            try:
                held: Callable[[], object] = weakref.ref(product)
            except TypeError:  # no weak references to it: keep it
                held = functools.partial(_itself, product)
            self._components[id(product)] = (held, component)
            return product

        return build

    def reference_of(self, value: object) -> tuple[Any, ...] | None:
        """``value``'s ``HELD`` reference, if it is a stand-in this session built."""
        known = self._components.get(id(value))
        if known is None or known[0]() is not value:
            return None
        number = self._numbers.get(id(value))
        if number is None:
            number = len(self._objects) + 1
            extras = extension_members(known[1], value)
            self._objects[number] = (value, known[1], extras)
            self._numbers[id(value)] = number
        _value, component, extras = self._objects[number]
        return (wire.HELD, number, component, extras)

    def serve(self, frame: Any, child_proxy: Callable[[int, str, tuple[str, ...]], Proxy]) -> Any:
        """The reply to one callback frame of the child (never raises)."""
        try:
            return self._serve(frame, child_proxy)
        except wire.WireError as e:
            return ("bad", f"a malformed callback: {e}")
        except Exception as e:  # noqa: BLE001 - the stand-in's own error, for the caller
            return raised(e)

    def _serve(self, frame: Any, child_proxy: Callable[[int, str, tuple[str, ...]], Proxy]) -> Any:
        if not (isinstance(frame, tuple) and len(frame) >= 3 and type(frame[1]) is str):
            raise wire.WireError("not a callback")

        def resolve(data: Any) -> object:
            if type(data) is int:
                raise wire.WireError("a bare handle in a callback")
            number, component, extras = _valid_reference(data)
            if data[0] == wire.HELD:
                held = self._objects.get(number)
                if held is None:
                    raise wire.WireError(f"no stand-in numbered {number}")
                return held[0]
            proxy = self._child_proxies.get(number)
            if proxy is None:
                proxy = self._child_proxies[number] = child_proxy(number, component, extras)
            return proxy

        op = frame[1]
        # only an engine loop's parts are built for the child (the one composition that
        # asks for them): a stand-in of a component the adapter provides would be the
        # reference graded as the submission's, and none is ever built
        if op == "build" and len(frame) == 4 and frame[2] in self.factories and frame[2] in _PARTS:
            args = wire.from_wire(frame[3])
            if not isinstance(args, tuple):
                raise wire.WireError("a build's arguments are a tuple")
            product = self.tracked(frame[2], self.factories[frame[2]])(*args)
            reference = self.reference_of(product)
            assert reference is not None
            self._used(reference[1])
            return ("ok", reference)
        if op in ("call", "get") and type(frame[2]) is int and frame[2] in self._objects:
            target, component, extras = self._objects[frame[2]]
            self._used(frame[2])
            member = frame[3] if len(frame) > 3 else None
            declared = _members(component, extras).get(member) if type(member) is str else None
            if declared is None:
                raise wire.WireError(f"{component} has no member {member!r}")
            assert isinstance(member, str)
            if op == "get" and len(frame) == 4 and isinstance(declared, property):
                value = getattr(target, member)
                read = True
                self._asked.add((component, member))
            elif op == "call" and len(frame) == 6 and not isinstance(declared, property):
                args = wire.from_wire(frame[4], resolve)
                kwargs = wire.from_wire(frame[5], resolve)
                if not isinstance(args, tuple) or not isinstance(kwargs, dict):
                    raise wire.WireError("a call's arguments are a tuple and a dict")
                value = getattr(target, member)(*args, **kwargs)
                read = not args and not kwargs and query_name(member) in _reads(component, extras)
                if read:
                    self._asked.add((component, query_name(member)))
            else:
                raise wire.WireError(f"a malformed {op} of {component}.{member}")
            encoded = wire.to_wire(value, handle_of=self.reference_of)
            return ("ok", encoded, self.reads()) if read else ("ok", encoded)
        raise wire.WireError(f"unknown callback {op!r}")

    def _used(self, number: int) -> None:
        _target, component, extras = self._objects[number]
        if _reads(component, extras):
            self._recent.pop(number, None)
            self._recent[number] = None
            if len(self._recent) > RECENT_STAND_INS:
                del self._recent[next(iter(self._recent))]

    def reads(self) -> tuple[tuple[int, dict[str, Any]], ...]:
        """The reads the child asked for before, of the stand-ins used last, encoded:
        (number, name -> value) pairs (a frame's dicts have string keys). A read that
        raises is left out (the child asks for it, and gets the error)."""
        found: list[tuple[int, dict[str, Any]]] = []
        for number in self._recent:
            target, component, extras = self._objects[number]
            values: dict[str, Any] = {}
            found.append((number, values))
            for name in _reads(component, extras):
                if (component, name) not in self._asked:
                    continue
                try:
                    query = name.endswith("()")
                    value = getattr(target, name[:-2])() if query else getattr(target, name)
                    values[name] = wire.to_wire(value, handle_of=self.reference_of)
                except Exception:  # noqa: BLE001, S112 - asked for alone, it raises there
                    continue
        return tuple(found)


#: A read the grader did not send.
_UNREAD = object()


def _itself(value: object) -> object:
    return value


def raised(error: BaseException) -> tuple[Any, ...]:
    """An exception as a reply: ``("raise", type name, message, location, spec)``."""
    from harness.isolation.child import _raised

    return _raised(error)


# --- the child's side ------------------------------------------------------------------------


class GraderLink:
    """The child's end of the socket, for callbacks: a callback is sent, and the
    grader's requests that arrive before its reply (calls on the child's components that
    the stand-in makes) are answered in turn by ``serve``."""

    def __init__(self, sock: socket.socket, serve: Callable[[Any], tuple[Any, ...]]) -> None:
        self.sock = sock
        self.serve = serve

    def callback(self, *message: Any) -> Any:
        wire.send(self.sock, ("callback", *message))
        while True:
            try:
                header = wire.recv_exact(self.sock, wire.HEADER_SIZE)
                frame = wire.decode_frame(wire.recv_exact(self.sock, wire.frame_size(header)))
            except EOFError:
                os._exit(0)  # the grader is gone: nothing is left to answer
            if isinstance(frame, tuple) and len(frame) == 2 and frame[0] == "callback_reply":
                return frame[1]
            reply = self.serve(frame)
            wire.send(self.sock, reply)
            if reply[0] == "oom":
                os._exit(3)  # as the child's own loop: its heap may be in any state


class StandInChannel:
    """What a proxy in the child needs (:class:`.proxy.Channel`): calls and reads of a
    stand-in the grader holds, as callbacks. ``encode`` turns the child's own components
    in the arguments into references the grader can call back."""

    def __init__(self, link: GraderLink, encode: Callable[[object], Any],
                 resolve: Callable[[Any], object]) -> None:
        self.link = link
        self.encode = encode
        self.resolve = resolve
        self._proxies: dict[int, Proxy] = {}
        #: the reads the grader sent with its last reply (see the module's docstring):
        #: good until the child sends it anything, or it sends the child a request
        self._reads: dict[int, dict[str, Any]] = {}

    def forget_reads(self) -> None:
        """A request from the grader: the stand-ins may have changed since."""
        self._reads = {}

    def proxy(self, data: tuple[Any, ...]) -> Proxy:
        """The proxy of a ``HELD`` reference (one per stand-in, so ``is`` holds)."""
        number, component, extras = _valid_reference(data)
        if number not in self._proxies:
            self._proxies[number] = proxy_class(component, extras)(self, number, 0)
        return self._proxies[number]

    def build(self, component: str, args: tuple[Any, ...]) -> Any:
        return self._value(self._callback("build", component, wire.to_wire(args)))

    def call(
        self, proxy: Proxy, member: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        check: Check,
    ) -> Any:
        if not args and not kwargs:
            known = self._reads.get(proxy._handle, {}).get(query_name(member), _UNREAD)
            if known is not _UNREAD:
                return wire.from_wire(known, self.resolve)
        reply = self._callback(
            "call", proxy._handle, member, self.encode(args), self.encode(kwargs)
        )
        return self._value(reply)

    def get(self, proxy: Proxy, member: str, check: Check) -> Any:
        if member.endswith("()"):  # an observed query (extensions.OBSERVED_QUERIES)
            return self.call(proxy, member[:-2], (), {}, check)
        known = self._reads.get(proxy._handle, {}).get(member, _UNREAD)
        if known is not _UNREAD:  # decoded anew: a read never shares an object
            return wire.from_wire(known, self.resolve)
        return self._value(self._callback("get", proxy._handle, member))

    def _callback(self, *message: Any) -> Any:
        """One callback's reply; the reads it brings replace the last ones (requests the
        grader made while it served this callback may have changed those)."""
        self._reads = {}
        reply = self.link.callback(*message)
        if isinstance(reply, tuple) and len(reply) == 3 and isinstance(reply[2], tuple):
            self._reads = dict(reply[2])
        return reply

    def call_each(
        self, proxy: Proxy, member: str, calls: Iterable[tuple[Any, ...]], check: Check
    ) -> Iterator[Any]:
        for args in calls:
            yield self.call(proxy, member, args, {}, check)

    def drop(self, proxy: Proxy) -> None:
        """Nothing: the grader forgets its stand-ins with the property."""

    def _value(self, reply: Any) -> Any:
        kind = reply[0] if isinstance(reply, tuple) and reply else None
        if kind == "ok" and len(reply) in (2, 3):
            return wire.from_wire(reply[1], self.resolve)
        if kind == "raise" and len(reply) == 5:
            raise rebuilt_error(str(reply[1]), str(reply[2]), str(reply[3]), reply[4] is True)
        raise RuntimeError(f"the grader's stand-in could not answer: {reply!r:.300}")

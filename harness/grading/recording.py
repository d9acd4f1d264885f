"""Record the calls a property makes on its components, for reproducer scripts.

:func:`recording_parts` wraps every factory of a :class:`~properties.framework.Parts` so
that each product is a transparent proxy: the property sees the same objects behave the
same way, and a :class:`CallLog` keeps, in order, every *top-level* construction, method
call and property read with a snapshot of its arguments and of its outcome. Calls one
component makes on another while serving a call (the scheduling hook asking the cache
manager, the engine loop driving everything) are not recorded: replaying the top-level
call makes them again. Nor is a probe of an optional capability the object lacks (a read
of a member outside its Protocol that raises ``AttributeError``): a reproducer uses only
what the implementation provides.

The grader records only when it replays the single minimal failing test case
(``@reproduce_failure``), so the log is exactly that test case's calls, and the
narration reported during it (``note()``) is interleaved by position.

The caller's writes are recorded too (:class:`Write`): every array that crosses a
top-level call, in its arguments or its result, is watched, and a change made between
calls — the property writing into a result it owns, or into a buffer it handed over
(WRK-3) — is logged before the next call, so that a reproducer makes the same writes
and an implementation that aliases what it was given or what it returned fails there as
it did when graded. Changes made during a call are the implementation's own: replaying
the call makes them again.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np

from harness.loader import protocol_members
from properties.framework import Parts
from spec.adapter import COMPONENTS

#: Variable names in scripts, per component (a second instance gets a number).
SHORT_NAMES: Mapping[str, str] = {
    "processor": "processor",
    "hasher": "hasher",
    "feature_hasher": "feature_hasher",
    "encoder": "encoder",
    "encoder_cache_manager": "cache",
    "encoder_decoder_cache_manager": "encdec_cache",
    "splice": "splice",
    "scheduling_hook": "hook",
    "block_hasher": "block_hasher",
    "item_cache": "item_cache",
    "embedding_cache": "embedding_cache",
    "worker_store": "worker",
    "engine_loop": "engine",
}


@dataclass(frozen=True)
class Returned:
    value: object


@dataclass(frozen=True)
class Raised:
    error_type: type[BaseException]
    message: str


Outcome = Returned | Raised


@dataclass
class Construction:
    """``var = <owner>.<component>(*args)`` at the top level."""

    var: str
    component: str
    args: tuple[object, ...]
    notes_before: int
    outcome: Outcome | None = None
    #: ``id()`` of each argument the call got (:meth:`CallLog.identities`).
    arg_ids: tuple[int, ...] = ()


@dataclass
class Call:
    """``var.member(*args, **kwargs)`` (``kind="call"``) or a read of ``var.member``."""

    var: str
    component: str
    member: str
    kind: Literal["call", "get"]
    args: tuple[object, ...]
    kwargs: dict[str, object]
    notes_before: int
    outcome: Outcome | None = None
    #: ``id()`` of each argument, then each keyword argument's value, the call got: which
    #: were the same object (:meth:`CallLog.identities`).
    arg_ids: tuple[int, ...] = ()


Entry = Construction | Call

#: One step from a call's arguments or result to an array inside it: ``("arg", i)``,
#: ``("kwarg", name)``, ``("index", i)``, ``("key", k)`` or ``("attr", name)``.
PathStep = tuple[str, object]


@dataclass(frozen=True)
class Write:
    """Before entry ``before``, the caller wrote ``contents`` into the array reached by
    ``path`` from the arguments (``path`` starts with ``arg``/``kwarg``) or the result
    (``where == "result"``) of the call at entry ``origin``."""

    before: int
    origin: int
    where: Literal["args", "result"]
    path: tuple[PathStep, ...]
    contents: np.ndarray[Any, Any]


@dataclass
class _Watched:
    array: np.ndarray[Any, Any]
    seen: bytes
    origin: int
    where: Literal["args", "result"]
    path: tuple[PathStep, ...]


#: How deep a result or an argument is searched for arrays.
_WATCH_DEPTH = 6

T = TypeVar("T")


@dataclass
class CallLog:
    """What one test case did to the components, in order."""

    entries: list[Entry] = field(default_factory=list)
    #: The narration reported so far (the grader points Hypothesis' reporter here).
    notes: list[str] = field(default_factory=list)
    depth: int = 0
    #: Every proxy and factory handed out: snapshots keep them as themselves.
    keep: dict[int, object] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    #: The caller's writes into arrays that crossed a call, in order.
    writes: list[Write] = field(default_factory=list)
    watched: dict[int, _Watched] = field(default_factory=dict)
    alive: list[object] = field(default_factory=list)

    def identities(self, *values: object) -> tuple[int, ...]:
        """The ``id()`` of each argument, kept alive for the whole log so that no id is
        reused: an implementation that keys by identity (a typical bug) sees two equal
        objects as two, and one object passed twice as one, in the script as when graded."""
        self.alive.extend(values)
        return tuple(id(v) for v in values)

    def restart(self) -> None:
        """Forget everything recorded: a new test case begins (explicit examples)."""
        self.entries.clear()
        self.notes.clear()
        self.writes.clear()
        self.watched.clear()
        self.counters.clear()

    def writes_before(self, index: int) -> list[Write]:
        return [w for w in self.writes if w.before == index]

    def note_writes(self) -> None:
        """Log what the caller wrote into watched arrays since the last call."""
        for watched in self.watched.values():
            now = _contents(watched.array)
            if now != watched.seen:
                watched.seen = now
                self.writes.append(
                    Write(
                        len(self.entries),
                        watched.origin,
                        watched.where,
                        watched.path,
                        watched.array.copy(),
                    )
                )

    def watch(self, origin: int, args: tuple[object, ...], kwargs: Mapping[str, object],
              result: object) -> None:
        """Watch the arrays of call ``origin`` (after it returned), and take every watched
        array's contents as of now: what the call itself changed is not the caller's."""
        found: list[tuple[Literal["args", "result"], tuple[PathStep, ...], object]] = [
            *(("args", (("arg", i),), a) for i, a in enumerate(args)),
            *(("args", (("kwarg", k),), v) for k, v in kwargs.items()),
            ("result", (), result),
        ]
        for where, path, value in found:
            for array, inner in _arrays(value, path, _WATCH_DEPTH):
                if id(array) not in self.watched:
                    self.watched[id(array)] = _Watched(array, b"", origin, where, inner)
        for watched in self.watched.values():
            watched.seen = _contents(watched.array)

    def new_var(self, component: str) -> str:
        count = self.counters.get(component, 0) + 1
        self.counters[component] = count
        short = SHORT_NAMES.get(component, component)
        return short if count == 1 else f"{short}{count}"

    def snapshot(self, value: T) -> T:
        """A deep copy as of now (arrays may be mutated later), proxies kept as they are."""
        try:
            return copy.deepcopy(value, dict(self.keep))
        except Exception:  # noqa: BLE001 - an uncopyable value is kept as it is
            return value


def _contents(array: np.ndarray[Any, Any]) -> bytes:
    return bytes(np.ascontiguousarray(array).tobytes())


def _arrays(
    value: object, path: tuple[PathStep, ...], depth: int
) -> list[tuple[np.ndarray[Any, Any], tuple[PathStep, ...]]]:
    """The arrays inside ``value`` (sequences, mappings and dataclasses searched), each
    with its path; components (proxies) are not searched."""
    if isinstance(value, np.ndarray):
        return [(value, path)] if value.dtype.kind in "biufc" else []
    if depth == 0 or isinstance(value, (Recorded, RecordingFactory, str, bytes)):
        return []
    found: list[tuple[np.ndarray[Any, Any], tuple[PathStep, ...]]] = []
    if isinstance(value, (list, tuple)):
        for i, inner in enumerate(value):
            found += _arrays(inner, (*path, ("index", i)), depth - 1)
    elif isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(key, (str, int)):
                found += _arrays(inner, (*path, ("key", key)), depth - 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            found += _arrays(getattr(value, f.name), (*path, ("attr", f.name)), depth - 1)
    return found


@functools.cache
def _declared(component: str) -> frozenset[str]:
    """The members of ``component``'s Protocol (spec/components.py): what every
    implementation of it has, unlike the optional capabilities of its extensions."""
    return frozenset(protocol_members(dict(COMPONENTS)[component]))


class RecordingFactory:
    """A component factory that hands out :class:`Recorded` proxies."""

    def __init__(self, component: str, factory: Callable[..., Any], log: CallLog) -> None:
        self.component = component
        self.factory = factory
        self.log = log
        log.keep[id(self)] = self

    def __call__(self, *args: Any) -> Any:
        log = self.log
        if log.depth > 0:
            return self.factory(*args)  # built by another component: not ours to record
        log.note_writes()
        entry = Construction(
            log.new_var(self.component),
            self.component,
            log.snapshot(args),
            len(log.notes),
            arg_ids=log.identities(*args),
        )
        log.entries.append(entry)
        log.depth += 1
        try:
            product = self.factory(*args)
        except BaseException as e:
            entry.outcome = Raised(type(e), str(e))
            raise
        finally:
            log.depth -= 1
        entry.outcome = Returned(None)
        return Recorded(product, entry.var, self.component, log)


class Recorded:
    """A transparent proxy that records top-level calls and reads on its target."""

    __slots__ = ("_mmspec_target", "_mmspec_var", "_mmspec_component", "_mmspec_log")

    def __init__(self, target: object, var: str, component: str, log: CallLog) -> None:
        object.__setattr__(self, "_mmspec_target", target)
        object.__setattr__(self, "_mmspec_var", var)
        object.__setattr__(self, "_mmspec_component", component)
        object.__setattr__(self, "_mmspec_log", log)
        log.keep[id(self)] = self

    def __getattr__(self, name: str) -> Any:
        target = object.__getattribute__(self, "_mmspec_target")
        log: CallLog = object.__getattribute__(self, "_mmspec_log")
        if name.startswith("_") or log.depth > 0:
            return getattr(target, name)
        var = object.__getattribute__(self, "_mmspec_var")
        component = object.__getattribute__(self, "_mmspec_component")
        log.note_writes()
        notes_before = len(log.notes)
        log.depth += 1
        try:
            value = getattr(target, name)
        except BaseException as e:
            if not (isinstance(e, AttributeError) and name not in _declared(component)):
                log.entries.append(
                    Call(var, component, name, "get", (), {}, notes_before,
                         Raised(type(e), str(e)))
                )
            # else: a member outside the component's Protocol that the object lacks is
            # a probe of an optional capability (``getattr(cache, "reset", None)``,
            # ``hasattr``, ``isinstance`` against ``ResettableEncoderCache``), not a step
            # of the test case: a script that made it would end in this AttributeError
            # instead of reproducing (issue 32)
            raise
        finally:
            log.depth -= 1
        if callable(value):
            return _RecordedMethod(value, var, component, name, log)
        log.entries.append(
            Call(var, component, name, "get", (), {}, notes_before, Returned(log.snapshot(value)))
        )
        return value

    def __setattr__(self, name: str, value: object) -> None:
        setattr(object.__getattribute__(self, "_mmspec_target"), name, value)

    def __repr__(self) -> str:
        return repr(object.__getattribute__(self, "_mmspec_target"))


def var_of(proxy: Recorded) -> str:
    """The script variable that stands for ``proxy``."""
    return str(object.__getattribute__(proxy, "_mmspec_var"))


def target_of(proxy: Recorded) -> object:
    """The component behind ``proxy``."""
    return object.__getattribute__(proxy, "_mmspec_target")


class _RecordedMethod:
    def __init__(
        self, method: Callable[..., Any], var: str, component: str, name: str, log: CallLog
    ) -> None:
        self.method = method
        self.var = var
        self.component = component
        self.name = name
        self.log = log

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        log = self.log
        if log.depth > 0:
            return self.method(*args, **kwargs)
        log.note_writes()
        entry = Call(
            self.var,
            self.component,
            self.name,
            "call",
            log.snapshot(args),
            log.snapshot(kwargs),
            len(log.notes),
            arg_ids=log.identities(*args, *kwargs.values()),
        )
        index = len(log.entries)
        log.entries.append(entry)
        log.depth += 1
        try:
            result = self.method(*args, **kwargs)
        except BaseException as e:
            entry.outcome = Raised(type(e), str(e))
            raise
        finally:
            log.depth -= 1
        entry.outcome = Returned(log.snapshot(result))
        log.watch(index, args, kwargs, result)
        return result


def recording_parts(parts: Parts) -> tuple[Parts, CallLog]:
    """``parts`` with every factory wrapped, and the log they record into."""
    log = CallLog()
    factories = {
        component: RecordingFactory(component, getattr(parts, component), log)
        for component, _protocol in COMPONENTS
    }
    return Parts(**factories, provenance=dict(parts.provenance)), log

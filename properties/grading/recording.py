"""Record the calls a property makes on its components, for reproducer scripts.

:func:`recording_parts` wraps every factory of a :class:`~properties.framework.Parts` so
that each product is a transparent proxy: the property sees the same objects behave the
same way, and a :class:`CallLog` keeps, in order, every *top-level* construction, method
call and property read with a snapshot of its arguments and of its outcome. Calls one
component makes on another while serving a call (the scheduling hook asking the cache
manager, the engine loop driving everything) are not recorded: replaying the top-level
call makes them again.

The grader records only when it replays the single minimal failing test case
(``@reproduce_failure``), so the log is exactly that test case's calls, and the
narration reported during it (``note()``) is interleaved by position.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from properties.framework import Parts
from spec.adapter import COMPONENTS

#: Variable names in scripts, per component (a second instance gets a number).
SHORT_NAMES: Mapping[str, str] = {
    "processor": "processor",
    "hasher": "hasher",
    "encoder": "encoder",
    "encoder_cache_manager": "cache",
    "splice": "splice",
    "scheduling_hook": "hook",
    "block_hasher": "block_hasher",
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


Entry = Construction | Call

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
        entry = Construction(
            log.new_var(self.component), self.component, log.snapshot(args), len(log.notes)
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
        notes_before = len(log.notes)
        log.depth += 1
        try:
            value = getattr(target, name)
        except BaseException as e:
            log.entries.append(
                Call(var, component, name, "get", (), {}, notes_before, Raised(type(e), str(e)))
            )
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
        entry = Call(
            self.var,
            self.component,
            self.name,
            "call",
            log.snapshot(args),
            log.snapshot(kwargs),
            len(log.notes),
        )
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
        return result


def recording_parts(parts: Parts) -> tuple[Parts, CallLog]:
    """``parts`` with every factory wrapped, and the log they record into."""
    log = CallLog()
    factories = {
        component: RecordingFactory(component, getattr(parts, component), log)
        for component, _protocol in COMPONENTS
    }
    return Parts(**factories, provenance=dict(parts.provenance)), log

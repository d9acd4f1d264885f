"""The grader-side stand-ins for components that live in the isolated child.

A proxy has exactly the members of its component's Protocol (and of the extension
Protocols the child said its object meets). Calling a method or reading a property
sends the arguments as plain data, waits for the child, and checks the decoded result
against the Protocol's declared return type (:func:`conforms`, recursing into the spec's
dataclasses) *before* the property sees it. So a property only ever compares values
the grader itself decoded from bytes and checked: never an object of the submission's
making.

Errors from the child arrive as ``(type name, message)``: the spec's typed errors and
``NotImplementedError`` are raised as themselves (properties expect them); any other
exception — ``BaseException`` subclasses such as ``SystemExit`` and ``KeyboardInterrupt``
included — is raised as an :class:`ImplementationError` subclass of the same name,
an ordinary ``Exception`` that the runner reports as an error of the implementation.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union

import numpy as np

from harness.isolation.extensions import OBSERVED_QUERIES, extension_protocols, query_name
from harness.loader import protocol_members
from spec import errors
from spec.adapter import COMPONENTS


class ImplementationError(Exception):
    """An exception of the isolated implementation other than the spec's typed errors
    (subclasses take the original type's name)."""


class BadReturnValue(Exception):
    """The implementation returned something its Protocol does not allow."""


class ImplementationDied(Exception):
    """The isolated child died or hit a limit; the message says what happened."""


@functools.cache
def error_type(name: str) -> type[ImplementationError]:
    """An :class:`ImplementationError` subclass named ``name`` (one per name, so that
    Hypothesis tells distinct failures apart as it would in process)."""
    return type(name, (ImplementationError,), {"__module__": __name__})


_SPEC_ERRORS: dict[str, type[Exception]] = {
    name: value
    for name, value in vars(errors).items()
    if isinstance(value, type) and issubclass(value, errors.SpecError)
}
_SPEC_ERRORS["NotImplementedError"] = NotImplementedError


def rebuilt_error(name: str, message: str, location: str, spec: bool) -> Exception:
    """The exception the grader raises for one the child reported."""
    if spec and name in _SPEC_ERRORS:
        return _SPEC_ERRORS[name](message)
    where = f" (at {location})" if location else ""
    return error_type(name)(f"{message}{where}")


# --- checking returned values -------------------------------------------------------------

_PROTOCOLS: dict[str, type] = dict(COMPONENTS)


@functools.cache
def _hints(protocol: type, member: str) -> Any:
    declared = protocol_members(protocol)[member]
    function = declared.fget if isinstance(declared, property) else declared
    assert function is not None
    return typing.get_type_hints(function).get("return", Any)


@functools.cache
def _field_hints(cls: type) -> tuple[tuple[str, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


def conforms(value: object, hint: Any, where: str) -> None:
    """Raise :class:`BadReturnValue` unless ``value`` has the type ``hint`` declares.
    numpy scalars pass for ``int``/``float``/``bool`` as they would in process."""
    if hint is Any or hint is object:
        return
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is None or hint is type(None):
        ok = value is None
    elif origin in (Union, types.UnionType):
        for option in args:
            try:
                conforms(value, option, where)
            except BadReturnValue:
                continue
            return
        ok = False
    elif origin is Literal:
        ok = value in args
    elif hint is bool:
        ok = isinstance(value, bool | np.bool_)
    elif hint is int:
        ok = isinstance(value, int | np.integer) and not isinstance(value, bool)
    elif hint is float:
        ok = isinstance(value, float | int | np.floating | np.integer)
    elif origin is np.ndarray or hint is np.ndarray:
        ok = isinstance(value, np.ndarray)
    elif origin is tuple:
        ok = isinstance(value, tuple)
        if isinstance(value, tuple) and len(args) == 2 and args[1] is Ellipsis:
            for i, item in enumerate(value):
                conforms(item, args[0], f"{where}[{i}]")
        elif isinstance(value, tuple) and args:
            ok = len(value) == len(args)
            if ok:
                for i, (item, want) in enumerate(zip(value, args, strict=True)):
                    conforms(item, want, f"{where}[{i}]")
    elif origin in (list, set, frozenset, Sequence):
        kinds: tuple[type, ...] = (list, tuple) if origin is Sequence else (origin,)
        ok = isinstance(value, kinds)
        if ok and args and isinstance(value, list | tuple | set | frozenset):
            for item in value:
                conforms(item, args[0], f"{where}[...]")
    elif origin in (dict, Mapping):
        ok = isinstance(value, dict)
        if isinstance(value, dict) and args:
            for key, item in value.items():
                conforms(key, args[0], f"{where} key")
                conforms(item, args[1], f"{where}[{key!r}]")
    elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
        ok = type(value) is hint
        if ok:
            for name, field_hint in _field_hints(hint):
                conforms(getattr(value, name), field_hint, f"{where}.{name}")
    elif isinstance(hint, type):
        ok = isinstance(value, hint)
    else:
        return  # a hint this checker does not model: the property checks the value
    if not ok:
        raise BadReturnValue(
            f"{where} must be {_shown(hint)}, but the implementation returned "
            f"{type(value).__name__} {_short(value)}"
        )


def _shown(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --- the proxies ----------------------------------------------------------------------------


#: Checks a decoded result (raises :class:`BadReturnValue`); run on the session's clock.
Check = Callable[[Any], None]


class Channel(typing.Protocol):
    """What a proxy needs of the session that owns its child. ``check`` runs on the
    decoded result inside the property's time limit: decoding and checking a reply is
    time the child made the grader spend."""

    def call(
        self,
        proxy: Proxy,
        member: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        check: Check,
    ) -> Any: ...

    def get(self, proxy: Proxy, member: str, check: Check) -> Any: ...

    def drop(self, proxy: Proxy) -> None: ...


class Proxy:
    """Base of the generated proxy classes: a handle in one generation of the child."""

    __slots__ = ("_channel", "_handle", "_generation", "_fresh", "__weakref__")
    _component = ""

    def __init__(self, channel: Channel, handle: int, generation: int) -> None:
        self._channel = channel
        self._handle = handle
        self._generation = generation
        #: (request stamp, property -> raw reply) read by the child after the last call
        self._fresh: tuple[int, dict[str, Any]] | None = None

    def __repr__(self) -> str:
        return f"<isolated {self._component} #{self._handle}>"

    def __deepcopy__(self, memo: dict[int, object]) -> Proxy:
        # A copy would share the child's one object behind the handle, so the copies'
        # states would silently merge: refuse loudly (the exhaustive search replays
        # paths instead when the adapter is isolated).
        raise TypeError(
            f"an isolated {self._component} cannot be copied; "
            "reach states by replay (--clone replay)"
        )

    def __del__(self) -> None:
        try:
            self._channel.drop(self)
        except Exception:  # noqa: BLE001 - a finaliser must not raise
            pass


@functools.cache
def proxy_class(component: str, extras: tuple[str, ...]) -> type[Proxy]:
    """The proxy class of ``component`` with the extension members ``extras``."""
    protocol = _PROTOCOLS[component]
    members: dict[str, Any] = {"__slots__": (), "_component": component}
    for name, declared in protocol_members(protocol).items():
        members[name] = _member(component, protocol, name, declared)
    for extension in extension_protocols(component):
        for name, declared in protocol_members(extension).items():
            if name in extras:
                members[name] = _member(component, extension, name, declared)
    return type(f"Isolated{protocol.__name__}", (Proxy,), members)


def _member(
    component: str, protocol: type, name: str, declared: Callable[..., Any] | property
) -> Any:
    where = f"{protocol.__name__}.{name}"
    if isinstance(declared, property):

        def read(self: Proxy) -> Any:
            return self._channel.get(
                self, name, lambda value: conforms(value, _hints(protocol, name), where)
            )

        return property(read, doc=declared.__doc__)

    query = name in OBSERVED_QUERIES.get(component, ())

    def method(self: Proxy, *args: Any, **kwargs: Any) -> Any:
        def check(value: Any) -> None:
            conforms(value, _hints(protocol, name), f"{where}(...)")

        if query and not args and not kwargs:  # answered with the last call, if fresh
            return self._channel.get(self, query_name(name), check)
        return self._channel.call(self, name, args, kwargs, check)

    method.__name__ = name
    method.__doc__ = declared.__doc__
    method.__signature__ = inspect.signature(declared)  # type: ignore[attr-defined]
    return method

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, Union

import numpy as np

from harness.isolation.extensions import OBSERVED_QUERIES, extension_protocols, query_name
from harness.loader import protocol_members
from properties.framework import CALL_EACH
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
    numpy scalars pass for ``int``/``float``/``bool`` as they would in process.

    Every reply of the isolated child is checked here (hundreds of thousands of values
    in a grade), so each hint is compiled once into a checker (:func:`_checker`) that
    walks the value without re-reading the hint; the location of a mismatch
    (``where[2].field``) is only spelled out when there is one."""
    mismatch = _checker(hint)(value)
    if mismatch is not None:
        path, want, got = mismatch
        raise BadReturnValue(
            f"{where}{''.join(reversed(path))} must be {_shown(want)}, but the "
            f"implementation returned {type(got).__name__} {_short(got)}"
        )


#: A mismatch: the path below the checked value, innermost part first (each checker
#: that passes it up appends its own part), the hint there, and the value found there.
_Mismatch = tuple[list[str], Any, object]
_Checker = Callable[[object], _Mismatch | None]


def _passes(value: object) -> None:
    return None


def _checker(hint: Any) -> _Checker:
    """The checker of ``hint``, compiled once per hint (hints are hashable; one that is
    not is compiled each time)."""
    try:
        return _cached_checker(hint)
    except TypeError:
        return _compiled(hint)


@functools.cache
def _cached_checker(hint: Any) -> _Checker:
    return _compiled(hint)


def _compiled(hint: Any) -> _Checker:  # noqa: C901 - one branch per kind of hint
    """A function of a value that returns ``None`` when it has the type ``hint``
    declares, else the :data:`_Mismatch`; the same rules as :func:`conforms` states."""
    if hint is Any or hint is object:
        return _passes
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)

    def simple(ok: Callable[[object], bool]) -> _Checker:
        return lambda value: None if ok(value) else ([], hint, value)

    if hint is None or hint is type(None):
        return simple(lambda value: value is None)
    if origin in (Union, types.UnionType):
        options = tuple(_checker(option) for option in args)
        return simple(lambda value: any(option(value) is None for option in options))
    if origin is Literal:
        return simple(lambda value: value in args)
    if hint is bool:
        return simple(lambda value: isinstance(value, bool | np.bool_))
    if hint is int:
        return simple(
            lambda value: isinstance(value, int | np.integer) and not isinstance(value, bool)
        )
    if hint is float:
        return simple(lambda value: isinstance(value, float | int | np.floating | np.integer))
    if origin is np.ndarray or hint is np.ndarray:
        return simple(lambda value: isinstance(value, np.ndarray))
    if origin is tuple:
        return _tuple_checker(hint, args)
    if origin in (list, set, frozenset, Sequence):
        return _collection_checker(hint, origin, args)
    if origin in (dict, Mapping):
        return _mapping_checker(hint, args)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass_checker(hint)
    if isinstance(hint, type):
        return simple(lambda value: isinstance(value, hint))
    return _passes  # a hint this checker does not model: the property checks the value


def _inside(mismatch: _Mismatch, part: str) -> _Mismatch:
    mismatch[0].append(part)
    return mismatch


def _tuple_checker(hint: Any, args: tuple[Any, ...]) -> _Checker:
    if len(args) == 2 and args[1] is Ellipsis:
        each = _checker(args[0])

        def homogeneous(value: object) -> _Mismatch | None:
            if not isinstance(value, tuple):
                return ([], hint, value)
            for i, item in enumerate(value):
                bad = each(item)
                if bad is not None:
                    return _inside(bad, f"[{i}]")
            return None

        return homogeneous
    if not args:
        return lambda value: None if isinstance(value, tuple) else ([], hint, value)
    checkers = tuple(_checker(want) for want in args)

    def fixed(value: object) -> _Mismatch | None:
        if not isinstance(value, tuple) or len(value) != len(checkers):
            return ([], hint, value)
        for i, (item, check) in enumerate(zip(value, checkers, strict=True)):
            bad = check(item)
            if bad is not None:
                return _inside(bad, f"[{i}]")
        return None

    return fixed


def _collection_checker(hint: Any, origin: Any, args: tuple[Any, ...]) -> _Checker:
    kinds: tuple[type, ...] = (list, tuple) if origin is Sequence else (origin,)
    each = _checker(args[0]) if args else None

    def collection(value: object) -> _Mismatch | None:
        if not isinstance(value, kinds):
            return ([], hint, value)
        if each is not None and isinstance(value, list | tuple | set | frozenset):
            for item in value:
                bad = each(item)
                if bad is not None:
                    return _inside(bad, "[...]")
        return None

    return collection


def _mapping_checker(hint: Any, args: tuple[Any, ...]) -> _Checker:
    keys, items = (_checker(args[0]), _checker(args[1])) if args else (None, None)

    def mapping(value: object) -> _Mismatch | None:
        if not isinstance(value, dict):
            return ([], hint, value)
        if keys is not None and items is not None:
            for key, item in value.items():
                bad = keys(key)
                if bad is not None:
                    return _inside(bad, " key")
                bad = items(item)
                if bad is not None:
                    return _inside(bad, f"[{key!r}]")
        return None

    return mapping


def _declared_fields(cls: Any) -> tuple[tuple[str, Any], ...]:
    return _field_hints(cls)


def _dataclass_checker(hint: Any) -> _Checker:
    fields: tuple[tuple[str, _Checker], ...] | None = None

    def instance(value: object) -> _Mismatch | None:
        nonlocal fields
        if type(value) is not hint:
            return ([], hint, value)
        if fields is None:  # compiled on first use: a dataclass may refer to itself
            fields = tuple((name, _checker(want)) for name, want in _declared_fields(hint))
        for name, check in fields:
            bad = check(getattr(value, name))
            if bad is not None:
                return _inside(bad, f".{name}")
        return None

    return instance


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

    def call_each(
        self, proxy: Proxy, member: str, calls: Iterable[tuple[Any, ...]], check: Check
    ) -> Iterator[Any]: ...

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
    declaring: dict[str, type] = {}
    for name, declared in protocol_members(protocol).items():
        members[name] = _member(component, protocol, name, declared)
        declaring[name] = protocol
    for extension in extension_protocols(component):
        for name, declared in protocol_members(extension).items():
            if name in extras:
                members[name] = _member(component, extension, name, declared)
                declaring[name] = extension
    members[CALL_EACH] = _call_each(declaring)
    return type(f"Isolated{protocol.__name__}", (Proxy,), members)


def _call_each(declaring: dict[str, type]) -> Callable[..., Iterator[Any]]:
    """The proxy's :data:`~properties.framework.CALL_EACH`: a method called with each
    argument tuple of ``calls`` in batches of one round trip, each result checked as the
    method's own (:func:`properties.framework.answers`)."""

    def call_each(
        self: Proxy, member: str, calls: Iterable[tuple[Any, ...]]
    ) -> Iterator[Any]:
        protocol = declaring[member]
        where = f"{protocol.__name__}.{member}(...)"

        def check(value: Any) -> None:
            conforms(value, _hints(protocol, member), where)

        return self._channel.call_each(self, member, calls, check)

    return call_each


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

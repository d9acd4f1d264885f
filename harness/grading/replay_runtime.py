"""The runtime of a reproducer script: this module's source is copied into every script.

A reproducer replays, as plain calls, what a property did to an implementation in its
minimal failing test case, and after each call states what the specification expects
(:func:`expect`, :func:`raises`). It must run on a student's machine without Hypothesis
and without this package, so this module imports only the standard library and numpy,
and :func:`normal` is the one definition of "the same result" for the grader (which
computes the expectations) and for the script (which checks them). Every way a script
ends gives one exit status per outcome (:data:`PASSED` ... :data:`NOT_REPLAYED`,
:func:`finish`), which the grader reads back.

Results are compared in a plain form (:func:`normal`): sequences as lists, sets and
mappings sorted, dataclasses as their fields, arrays as shape, dtype, values and a
digest of their bytes (bit-exact). Some results have no single right value — a content
hash, an encoder's embeddings — only a right *pattern of equalities*: equal content must
give equal hashes, different content different ones. Those are compared "opaquely": each
distinct value becomes ``<hash #n>``, numbered in order of first appearance, so the
script checks that the implementation repeats and distinguishes values exactly where
the specification does.

Over 400 lines (483) because every reproducer script embeds this file verbatim (standard
library and numpy only), so it stays one file.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import math
import os
import sys
import sysconfig
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Any, NoReturn

import numpy as np

#: Arrays with more elements are compared by digest only.
LIST_LIMIT = 64

#: How a result is compared (see the module docstring).
MODES = ("exact", "ordered", "opaque", "opaque-strings", "opaque-arrays")


class Form:
    """An expectation given directly in :func:`normal` form (a value with no literal)."""

    def __init__(self, form: object) -> None:
        self.form = form


class Labels:
    """Numbers the distinct values of each opaque kind in order of first appearance."""

    def __init__(self) -> None:
        self._seen: dict[str, list[object]] = {}

    def label(self, kind: str, key: object) -> str:
        seen = self._seen.setdefault(kind, [])
        for number, known in enumerate(seen, 1):
            if known == key:
                return f"<{kind} #{number}>"
        seen.append(key)
        return f"<{kind} #{len(seen)}>"


def normal(value: object, mode: str = "exact", labels: Labels | None = None) -> object:
    """The plain, comparable form of ``value`` under ``mode`` (one of :data:`MODES`)."""
    if mode not in MODES:
        raise ValueError(f"unknown comparison mode {mode!r}")
    labels = Labels() if labels is None else labels
    if mode == "opaque":
        return labels.label("value", normal(value, "exact", labels))
    return _normal(value, mode, labels)


def _normal(value: object, mode: str, labels: Labels) -> object:
    if isinstance(value, np.ndarray):
        return _array(value, mode, labels)
    if isinstance(value, np.generic):
        return _normal(value.item(), mode, labels)
    if isinstance(value, float):
        return value if math.isfinite(value) else ("float", repr(value))
    if isinstance(value, str):
        return labels.label("hash", value) if mode == "opaque-strings" else value
    if value is None or isinstance(value, (bool, int, bytes)):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        named = ((f.name, _normal(getattr(value, f.name), mode, labels)) for f in fields)
        return ("obj", tuple(named))
    if isinstance(value, Mapping):
        pairs = [(_normal(k, "exact", labels), _normal(v, mode, labels)) for k, v in value.items()]
        if mode == "ordered":
            return ("omap", tuple(pairs))
        return ("map", tuple(sorted(pairs, key=repr)))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted((_normal(v, mode, labels) for v in value), key=repr)))
    if isinstance(value, (list, tuple)):
        return [_normal(v, mode, labels) for v in value]
    return ("object", type(value).__qualname__)


def _array(array: np.ndarray[Any, Any], mode: str, labels: Labels) -> object:
    shape = tuple(int(n) for n in array.shape)
    dtype = str(array.dtype)
    digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]
    if mode == "opaque-arrays":
        return ("array", shape, dtype, labels.label("embeddings", (shape, dtype, digest)))
    if array.size > LIST_LIMIT:
        return ("array", shape, dtype, f"sha256:{digest}")
    return ("array", shape, dtype, _finite(array.tolist()), f"sha256:{digest}")


def _finite(values: object) -> object:
    """``tolist()`` output with NaN and infinities spelled out (NaN != NaN)."""
    if isinstance(values, list):
        return [_finite(v) for v in values]
    if isinstance(values, float) and not math.isfinite(values):
        return ("float", repr(values))
    return values


def show(form: object, limit: int = 400) -> str:
    """A readable rendering of a :func:`normal` form."""
    text = _show(form)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _show(form: object) -> str:
    if isinstance(form, tuple) and form and isinstance(form[0], str):
        tag = form[0]
        if tag == "array":
            return f"array(shape={form[1]}, dtype={form[2]}, {_show(form[3])})"
        if tag == "obj":
            return "(" + ", ".join(f"{k}={_show(v)}" for k, v in form[1]) + ")"
        if tag in ("map", "omap"):
            body = ", ".join(f"{_show(k)}: {_show(v)}" for k, v in form[1])
            return "{" + body + "}" + (" (in this order)" if tag == "omap" and form[1] else "")
        if tag == "set":
            return "{" + ", ".join(_show(v) for v in form[1]) + "}" if form[1] else "set()"
        if tag == "float":
            return str(form[1])
        if tag == "object":
            return f"<a {form[1]} object>"
    if isinstance(form, list):
        return "[" + ", ".join(_show(v) for v in form) + "]"
    return repr(form) if not (isinstance(form, str) and form.startswith("<")) else form


#: Every object :func:`fresh` made, alive to the end (no id is reused).
KEPT: list[Any] = []


def fresh(value: Any) -> Any:
    """An object of its own equal to ``value``, kept alive to the end of the script:
    Python shares equal constants (bytes, tuples of constants) within a script and
    reuses a freed object's id, where the graded run passed distinct objects — which an
    implementation that keys by identity (``id(data)``) tells apart."""
    if isinstance(value, bytes):
        value = bytes(bytearray(value))
    elif isinstance(value, tuple) and value:
        value = tuple(list(value))
    KEPT.append(value)
    return value


#: Who gave a result: the graded implementation, or the run as a whole (an exception
#: raised inside the reference, standing in for a component the adapter lacks).
YOURS = "your implementation"
THE_RUN = "the replay"


class Mismatch(AssertionError):
    """A replayed call did not give what the specification expects."""

    def __init__(
        self, step: int, call: str, expected: str, actual: str, who: str = YOURS
    ) -> None:
        super().__init__(
            f"step {step}: {call}\n"
            f"  the specification expects: {expected}\n"
            f"  {(who + ' gave:').ljust(26)} {actual}"
        )
        self.step = step


#: Folders of code that stands in for components the graded adapter does not provide
#: (the script's loader adds the checkout's reference/ when it loads the reference).
STAND_IN_FOLDERS: list[str] = []
#: Folders whose frames never say who raised: the checkout's spec/ (its types validate
#: what they are given), the standard library, installed packages.
PASSIVE_FOLDERS: list[str] = [
    os.path.realpath(path)
    for path in {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib")}
]


def _inside(filename: str, folders: list[str]) -> bool:
    path = os.path.realpath(filename)
    return any(path == f or path.startswith(f.rstrip(os.sep) + os.sep) for f in folders)


def raised_by(error: BaseException) -> tuple[str, str]:
    """Who raised ``error`` and where (the innermost frame that is not the spec's types,
    the standard library or an installed package): ``"script"`` when that frame is this
    script's own code, ``"stand-in"`` when it and every frame between it and the script
    are the reference's (standing in for a component the adapter lacks), else
    ``"yours"`` (your code raised, or called the code that raised)."""
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not _inside(frame.filename, PASSIVE_FOLDERS)
        or _inside(frame.filename, STAND_IN_FOLDERS)  # an installed mmspec's reference
    ]
    script = os.path.realpath(__file__)
    inner: list[traceback.FrameSummary] = []
    for frame in reversed(frames):
        if os.path.realpath(frame.filename) == script:
            break
        inner.append(frame)
    if not inner:
        last = frames[-1] if frames else None
        return "script", f"line {last.lineno}" if last else ""
    where = f"{_short(inner[0].filename)}:{inner[0].lineno} in {inner[0].name}"
    if all(_inside(frame.filename, STAND_IN_FOLDERS) for frame in inner):
        return "stand-in", where
    return "yours", where


def _short(filename: str) -> str:
    for folder in STAND_IN_FOLDERS:
        parent = os.path.dirname(folder.rstrip(os.sep))
        if _inside(filename, [folder]):
            return os.path.relpath(os.path.realpath(filename), parent)
    return filename


def _raised_mismatch(step: int, call: str, expected: str, error: Exception) -> Mismatch:
    """The mismatch of a call that raised ``error`` where the specification expects
    ``expected``; an error of this script's own code is raised as itself instead (it
    reproduces nothing)."""
    who, where = raised_by(error)
    if who == "script":
        raise error
    text = f"raised {type(error).__name__}: {error}"
    if who == "stand-in":
        return Mismatch(
            step, call, expected,
            f"{text} (inside the reference, which stands in for a component your adapter "
            f"does not provide, at {where}; from what your components gave it)",
            THE_RUN,
        )
    return Mismatch(step, call, expected, text + (f" (at {where})" if where else ""))


#: Opaque values are numbered separately for what is expected and what is got, so the
#: comparison is between their patterns of equalities.
WANT_LABELS = Labels()
GOT_LABELS = Labels()
_LABEL_NOTE = (
    "\n  (<kind #n> numbers the distinct values of that kind in order of first "
    "appearance; the specification fixes which results are equal, not their values)"
)


def expect(step: int, call: str, got: object, want: object, mode: str = "exact") -> None:
    """Check the result of step ``step``: equal to ``want`` under ``mode``."""
    wanted = want.form if isinstance(want, Form) else normal(want, mode, WANT_LABELS)
    actual = normal(got, mode, GOT_LABELS)
    if actual != wanted:
        mismatch = Mismatch(step, call, show(wanted), show(actual))
        if mode.startswith("opaque"):
            mismatch.args = (mismatch.args[0] + _LABEL_NOTE,)
        raise mismatch
    print(f"step {step}: {call} -> {show(actual, 120)}")


def observe(step: int, call: str, got: object) -> None:
    """A step with no expectation of its own (the specification leaves it open)."""
    print(f"step {step}: {call} -> {show(normal(got), 120)} (not checked)")


#: ``check``'s expectation when the specification leaves the value open.
UNCHECKED = Form(("unchecked",))


class Result:
    """What a step's call gave (``check`` reads it when the call is done)."""

    value: object = None


@contextmanager
def check(
    step: int, call: str, want: object = UNCHECKED, mode: str = "exact"
) -> Iterator[Result]:
    """The call inside stores its result in ``.value``; it must return (not raise), and
    its result must equal ``want`` under ``mode`` (see :func:`expect`), unless ``want``
    is :data:`UNCHECKED`."""
    result = Result()
    try:
        yield result
    except Exception as e:
        if want is UNCHECKED:
            wanted = "returns (its value is not checked)"
        else:
            form = want.form if isinstance(want, Form) else normal(want, mode, WANT_LABELS)
            wanted = "returns " + show(form)
        raise _raised_mismatch(step, call, wanted, e) from e
    if want is UNCHECKED:
        observe(step, call, result.value)
    else:
        expect(step, call, result.value, want, mode)


class Recurred(Mismatch):
    """The call the grader judged wrong gave, again, what it gave when graded."""

    def __init__(self, step: int, call: str, actual: str, finding: str) -> None:
        AssertionError.__init__(
            self,
            f"step {step}: {call}\n"
            f"  {YOURS} gave again what it gave when graded: {actual}\n"
            f"  which the grader judged: {finding}",
        )
        self.step = step


class Diverged(AssertionError):
    """A step of your own engine loop gave another result than when graded: what follows
    would not be the run the grader judged."""

    def __init__(self, step: int, call: str, graded: str, actual: str) -> None:
        super().__init__(
            f"step {step}: {call}\n"
            f"  when graded {YOURS} gave: {graded}\n"
            f"  this time it gave:{' ' * 14}{actual}\n"
            "  (it depends on something besides its inputs, or it changed since grading: "
            "replay the property instead)"
        )
        self.step = step


#: Opaque values of your own engine loop's results, numbered as the grader numbered them.
GRADED_LABELS = Labels()


def graded_form(value: object, labels: Labels | None = None) -> object:
    """The form :func:`as_graded` compares: what a call returned (exactly: arrays by
    their values' digest, so another platform's rounding shows as NOT REPLAYED, never
    as a reproduction), or the type of what it raised."""
    if isinstance(value, BaseException):
        return ("raises", type(value).__name__)
    return ("returns", normal(value, "exact", labels or GRADED_LABELS))


def _show_graded(form: object) -> str:
    if isinstance(form, tuple) and len(form) == 2 and form[0] == "raises":
        return f"raised {form[1]}"
    if isinstance(form, tuple) and len(form) == 2:
        return show(form[1])
    return show(form)


@contextmanager
def as_graded(step: int, call: str, graded: object, finding: str = "") -> Iterator[Result]:
    """A call of your own engine loop, where the specification fixes invariants rather
    than one schedule: it must give what it gave when graded (``graded``, a
    :func:`graded_form`), so that what follows replays the graded run. ``finding``: this
    is the call after which the grader found the violation — giving it again reproduces
    the failure."""
    result = Result()
    try:
        yield result
    except Exception as e:
        if raised_by(e)[0] == "script":
            raise
        now, shown = graded_form(e), f"raised {type(e).__name__}: {e}"
    else:
        now = graded_form(result.value)
        shown = _show_graded(now)
    if now != graded:
        raise Diverged(step, call, _show_graded(graded), shown)
    if finding:
        raise Recurred(step, call, shown, finding)
    print(f"step {step}: {call} -> {shown[:120]} (as when graded)")


@contextmanager
def builds(step: int, call: str) -> Iterator[None]:
    """The construction inside must not raise (it raised when graded)."""
    try:
        yield
    except Exception as e:
        raise _raised_mismatch(step, call, "builds it", e) from e
    print(f"step {step}: {call} built")


@contextmanager
def raises(
    step: int, call: str, error: type[BaseException], message: str | None = None
) -> Iterator[None]:
    """The call inside must raise ``error`` (an error type of spec/errors.py), with
    exactly ``message`` when the specification fixes it (SPL-3)."""
    wanted = f"raises {error.__name__}" + (f": {message}" if message is not None else "")
    try:
        yield
    except error as e:
        if message is not None and str(e) != message:
            raise Mismatch(step, call, wanted, f"raised {type(e).__name__}: {e}") from e
        print(f"step {step}: {call} raised {type(e).__name__} as specified")
        return
    except Exception as e:
        raise _raised_mismatch(step, call, wanted, e) from e
    raise Mismatch(step, call, wanted, "returned without raising")


@contextmanager
def tolerate(step: int, call: str) -> Iterator[None]:
    """The call inside raised when graded; the specification says nothing about it."""
    try:
        yield
    except Exception as e:
        print(f"step {step}: {call} raised {type(e).__name__}: {e} (not checked)")


#: The script's exit statuses, one per outcome (its docstring lists them; the grader
#: reads them, harness/grading/reproducer.py).
PASSED = 0  # it ran to its end: every checked step gave what the specification expects
REPRODUCED = 1  # a step gave something else: the failure reproduces
CANNOT_RUN = 2  # no mmspec checkout, an adapter that does not load, or bad usage
CRASHED = 3  # an exception outside any checked step, or an exit before the script's end
NOT_REPLAYED = 4  # a call checked against the graded run gave something else


def finish(status: int, message: str = "") -> NoReturn:
    """End the script with ``status`` (``message`` on stderr first). Through ``os._exit``,
    so that nothing after it changes what the status says: Python's own status for an
    uncaught exception is 1, which here means REPRODUCED."""
    if message:
        print(message, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _report_mismatch(
    kind: type[BaseException], error: BaseException, trace: TracebackType | None
) -> None:
    """Print a :class:`Mismatch` as its message alone (the runtime's frames are noise),
    after the traceback of the exception behind it, if any (where to look); any other
    exception as a traceback. Then end with the status that says which it was."""
    if isinstance(error, Mismatch):
        cause = error.__cause__
        if cause is not None and not isinstance(cause, Mismatch):
            print(f"The exception behind step {error.step}:", file=sys.stderr)
            traceback.print_exception(cause, file=sys.stderr)
        finish(REPRODUCED, f"\nREPRODUCED: {error}")
    if isinstance(error, Diverged):
        finish(NOT_REPLAYED, f"\nNOT REPLAYED: {error}")
    sys.__excepthook__(kind, error, trace)
    finish(CRASHED)


def _exited_early() -> None:
    """At an exit that is not :func:`finish` (``sys.exit`` in the code under test, say):
    the script stopped before its end, which is no verdict (status 0 would say it
    passed)."""
    finish(CRASHED, "\nSTOPPED: something called sys.exit() before the script's end")


def install() -> None:
    """Make an uncaught :class:`Mismatch` (or :class:`Diverged`) print as its message,
    and every way the script can end give the status of what happened."""
    sys.excepthook = _report_mismatch
    atexit.register(_exited_early)

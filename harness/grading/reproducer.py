"""Standalone reproducer scripts: a minimal failing test case as plain calls with checks.

From a :class:`~harness.grading.recording.CallLog` (what the property did to the
components in the minimal failing test case) this module writes a Python script that
imports only the student's adapter, ``spec`` and numpy, makes the same calls in the same
order, and after each call checks what the specification expects.

The expectations come from an oracle: the same calls replayed on the reference
implementation (:func:`oracle_outcomes`). The reference is correct per SPEC.md, and for
most results the specification leaves exactly one right answer (what the cache holds,
what the hook schedules, what the splice returns), so those are compared value for
value. Where it leaves the values open — a content hash, an encoder's embeddings, block
hashes — only the pattern of equalities is compared (see
:mod:`harness.grading.replay_runtime`). Where the specification fixes only invariants
(a student's own engine loop may schedule differently), each call is checked against
what it gave when graded, and the failure reproduces when the call after which the
grader found the violation gives the same again. The caller's writes between calls
(into a result it owns, or a buffer it handed over: WRK-3) are made as when graded
(:class:`~harness.grading.recording.Write`). The script is then run once
(:func:`verify_script`), through the grading child's isolation (limits, command
prefix, cleanup), and it is said to reproduce the failure on its own only when that run
ends in REPRODUCED.

Every call is a step inside an expectation (``check``, ``raises``, ``builds``): a call
that raises where a result is expected is a mismatch, and a probe meant to raise (an
invalid configuration) is replayed inside ``raises`` even when the reference builds it.

Over 400 lines (1106) because one pass from a call log to a script (literals, object
identities, graded checks, verification); its parts share the log's state.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from harness.grading.counterexample import is_hypothesis_line
from harness.grading.recording import (
    Call,
    CallLog,
    Construction,
    Outcome,
    PathStep,
    Raised,
    Recorded,
    RecordingFactory,
    Returned,
    Write,
    var_of,
)
from harness.grading.replay_runtime import (
    CANNOT_RUN,
    CRASHED,
    NOT_REPLAYED,
    PASSED,
    REPRODUCED,
    THE_RUN,
    Labels,
    graded_form,
    normal,
)
from harness.grading.report_text import printable
from harness.isolation.supervisor import Limits, describe_exit
from harness.names import IMPORT_ROOT, INSTALLED, PREFIX
from spec.adapter import Adapter

_RUNTIME_PATH = Path(__file__).with_name("replay_runtime.py")
#: The folder the script puts first on ``sys.path``: the checkout, or (installed) the
#: folder holding the ``mmspec`` package.
_CHECKOUT_ROOT = IMPORT_ROOT

#: How results of each (component, member) are compared; the default is "exact".
_MODES: Mapping[tuple[str, str], str] = {
    ("hasher", "hash_item"): "opaque",
    ("hasher", "item_identifier"): "opaque",
    ("feature_hasher", "feature_identity"): "opaque",
    ("feature_hasher", "feature_identifier"): "opaque",
    ("encoder", "encode"): "opaque-arrays",
    ("encoder", "encode_batch"): "opaque-arrays",
    ("block_hasher", "request_block_hashes"): "opaque-strings",
    ("block_hasher", "request_block_hashes_with"): "opaque-strings",
    ("encoder_cache_manager", "freeable"): "ordered",
}
#: Components whose results are checked only when the reference stands behind them:
#: SPEC.md fixes invariants for them, not one right schedule.
_OPEN_WHEN_THEIRS = frozenset({"engine_loop"})
#: Inside the reference engine loop the embeddings come from whichever encoder is used.
_ENGINE_MODE = "opaque-arrays"

_SPEC_MODULES = tuple(
    PREFIX + name for name in ("spec.types", "spec.components", "spec.adapter", "spec.errors")
)
_ERRORS_MODULE = PREFIX + "spec.errors"
#: Errors whose message SPEC.md fixes word for word (SPL-3, DIFF-3), not only their type.
_MESSAGE_FIXED = frozenset({"SpliceCountError"})


class Unrenderable(Exception):
    """A recorded value has no faithful Python literal."""


@dataclass(frozen=True)
class Verification:
    """What running the script against the graded adapter showed."""

    reproduces: bool
    #: The step at which it failed (None: it did not fail, or failed before any step).
    step: int | None
    #: The mismatch ("expects ... gave ..."), or what it did instead (bounded, escaped).
    detail: str
    #: It ran to the end: every checked call gave what the specification expects.
    completed: bool = False
    #: The mismatch is an exception raised inside the reference standing in for a
    #: component the adapter lacks (as the script's runtime says: untrusted, wording only).
    by_stand_in: bool = False
    #: Not run: ``detail`` says why.
    skipped: bool = False


#: The line of a script that builds the reference's components the adapter lacks.
REFERENCE_LINE = 'REFERENCE = load_adapter("reference")'
#: Why such a script is not run when the grader runs the submission as a user of its own.
REFERENCE_KEPT_FROM_SANDBOX = (
    "not run when graded: it builds the reference's components for those the adapter "
    "lacks, and the sandbox keeps the reference from the submission's user (it runs "
    "where the reference is, as the instructor's checkout)"
)


@dataclass(frozen=True)
class Reproducer:
    filename: str
    script: str
    steps: int
    verification: Verification | None = None


# --- the oracle ---------------------------------------------------------------------


def oracle_outcomes(log: CallLog, reference: Adapter) -> list[Outcome | None]:
    """Each entry's outcome when the same calls are made on the reference's components
    (None where it cannot be replayed: the object was never built), with the caller's
    writes (:class:`~harness.grading.recording.Write`) made between them."""
    objects: dict[str, object] = {}
    outcomes: list[Outcome | None] = []
    crossed: dict[tuple[int, str], object] = {}  # (entry, "args"/"result") -> live value
    written = {(w.origin, w.where) for w in log.writes}

    def resolve(value: object) -> object:
        return _resolve(value, objects, reference)

    for index, entry in enumerate(log.entries):
        for write in log.writes_before(index):
            _apply(write, crossed)
        if isinstance(entry, Construction):
            factory = getattr(reference, entry.component)
            if factory is None:
                outcomes.append(None)
                continue
            try:
                objects[entry.var] = factory(*[resolve(a) for a in entry.args])
            except Exception as e:  # noqa: BLE001 - recorded as the outcome
                outcomes.append(Raised(type(e), str(e)))
                continue
            outcomes.append(Returned(None))
            continue
        target = objects.get(entry.var)
        if target is None or not _has_member(target, entry.member):
            outcomes.append(None)  # nothing to replay it on: the reference lacks it
            continue
        try:
            value = getattr(target, entry.member)
            if entry.kind == "call":
                args = [resolve(a) for a in entry.args]
                kwargs = {k: resolve(v) for k, v in entry.kwargs.items()}
                if (index, "args") in written:  # written into later: not the log's own
                    keep = {id(o): o for o in objects.values()}
                    args, kwargs = copy.deepcopy((args, kwargs), keep)
                    crossed[(index, "args")] = (args, kwargs)
                value = value(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - recorded as the outcome
            outcomes.append(Raised(type(e), str(e)))
            continue
        crossed[(index, "result")] = value
        outcomes.append(Returned(log.snapshot(value)))
    return outcomes


def _has_member(target: object, member: str) -> bool:
    """Whether the reference's object has ``member`` (a method only the adapter's
    implementation offers, such as the torch adapter's precisions, does not)."""
    return any(member in vars(kind) for kind in type(target).__mro__) or member in getattr(
        target, "__dict__", {}
    )


def _apply(write: Write, crossed: Mapping[tuple[int, str], object]) -> None:
    """Make a recorded write on the oracle's side, where the same array exists there."""
    value: Any = crossed.get((write.origin, write.where))
    path = write.path
    if write.where == "args" and value is not None:
        args, kwargs = value
        kind, key = path[0]
        value = args[key] if kind == "arg" else kwargs.get(key)
        path = path[1:]
    for kind, key in path:
        try:
            value = getattr(value, str(key)) if kind == "attr" else value[key]
        except (AttributeError, IndexError, KeyError, TypeError):
            return
    if isinstance(value, np.ndarray) and value.shape == write.contents.shape:
        if value.flags.writeable:
            value[...] = write.contents


def _resolve(value: object, objects: Mapping[str, object], reference: Adapter) -> object:
    """``value`` with recorded components replaced by the oracle's counterparts."""
    if isinstance(value, Recorded):
        return objects.get(var_of(value))
    if isinstance(value, RecordingFactory):
        return getattr(reference, value.component)
    if isinstance(value, tuple):
        return tuple(_resolve(v, objects, reference) for v in value)
    if isinstance(value, list):
        return [_resolve(v, objects, reference) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, objects, reference) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: _resolve(getattr(value, f.name), objects, reference)
            for f in dataclasses.fields(value)
            if f.init and _holds_recorded(getattr(value, f.name))
        }
        return dataclasses.replace(value, **changes) if changes else value
    return value


def _holds_recorded(value: object) -> bool:
    if isinstance(value, (Recorded, RecordingFactory)):
        return True
    if isinstance(value, (tuple, list)):
        return any(_holds_recorded(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_recorded(v) for v in value.values())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(_holds_recorded(getattr(value, f.name)) for f in dataclasses.fields(value))
    return False


# --- literals -----------------------------------------------------------------------


class _Literals:
    """Python source for recorded values, and the imports it needs."""

    def __init__(self, owners: Mapping[str, str]) -> None:
        #: component -> "ADAPTER" or "REFERENCE": who built a factory argument
        self.owners = owners
        self.imports: dict[str, set[str]] = {}
        self.uses_reference = False

    def _import(self, module: str, name: str) -> str:
        self.imports.setdefault(module, set()).add(name)
        return name

    def render(self, value: object) -> str:
        if isinstance(value, Recorded):
            return var_of(value)
        if isinstance(value, RecordingFactory):
            owner = self.owners.get(value.component, "REFERENCE")
            self.uses_reference |= owner == "REFERENCE"
            return f"{owner}.{value.component}"
        if value is None or isinstance(value, (bool, int, str, bytes)):
            return repr(value)
        if isinstance(value, float):
            return repr(value) if np.isfinite(value) else f"float({repr(value)!r})"
        if isinstance(value, np.ndarray):
            return _array_literal(value)
        if isinstance(value, np.generic):
            return f"np.{type(value).__name__}({self.render(value.item())})"
        if isinstance(value, tuple):
            inner = ", ".join(self.render(v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if isinstance(value, list):
            return "[" + ", ".join(self.render(v) for v in value) + "]"
        if isinstance(value, dict):
            return (
                "{"
                + ", ".join(f"{self.render(k)}: {self.render(v)}" for k, v in value.items())
                + "}"
            )
        if isinstance(value, frozenset):
            return f"frozenset({self.render(set(value))})" if value else "frozenset()"
        if isinstance(value, set):
            if not value:
                return "set()"
            return "{" + ", ".join(sorted(self.render(v) for v in value)) + "}"
        if isinstance(value, Mapping):
            return self.render(dict(value))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._dataclass(value)
        raise Unrenderable(f"a {type(value).__module__}.{type(value).__qualname__}")

    def _dataclass(self, value: Any) -> str:
        kind = type(value)
        if kind.__module__ not in _SPEC_MODULES:
            raise Unrenderable(f"a {kind.__module__}.{kind.__qualname__}")
        name = self._import(kind.__module__, kind.__qualname__)
        args = []
        for f in dataclasses.fields(value):
            if not f.init:
                continue
            current = getattr(value, f.name)
            if f.default is not dataclasses.MISSING and _same(current, f.default):
                continue  # defaults make the call longer, not clearer
            args.append(f"{f.name}={self.render(current)}")
        return f"{name}({', '.join(args)})"


def _same(a: object, b: object) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - arrays and the like: not a plain default
        return False


def _array_literal(array: np.ndarray[Any, Any]) -> str:
    dtype = f"np.{array.dtype.name}" if hasattr(np, array.dtype.name) else repr(str(array.dtype))
    shape = tuple(int(n) for n in array.shape)
    flat = array.reshape(-1)
    if flat.size and bool(np.all(flat == flat[0])) and np.isfinite(flat[0]).all():
        return f"np.full({shape}, {flat[0].item()!r}, dtype={dtype})"
    if flat.size <= 64 and (array.dtype.kind not in "fc" or bool(np.isfinite(flat).all())):
        values = ", ".join(repr(v) for v in flat.tolist())
        return f"np.array([{values}], dtype={dtype}).reshape({shape})"
    data = np.ascontiguousarray(array).tobytes().hex()
    return f"np.frombuffer(bytes.fromhex({data!r}), dtype={dtype}).reshape({shape}).copy()"


# --- the script ---------------------------------------------------------------------


@dataclass(frozen=True)
class ScriptContext:
    """What the script's header says about where it comes from."""

    item: str
    property_name: str
    clause_id: str | None
    clause_title: str
    statement: str
    message: str
    adapter_ref: str
    command: str
    #: Graded in a child process: every call's arguments were new objects there.
    isolated: bool = False


def build_script(
    log: CallLog,
    oracle: Sequence[Outcome | None],
    provenance: Mapping[str, str],
    adapter_name: str,
    context: ScriptContext,
) -> tuple[str, int]:
    """The script's source and its number of steps. Raises :class:`Unrenderable`."""
    owners = {
        component: "ADAPTER" if owner == adapter_name else "REFERENCE"
        for component, owner in provenance.items()
    }
    literals = _Literals(owners)
    error_names: set[tuple[str, str]] = set()
    body: list[str] = []
    notes_done = 0
    rendered = [_render_entry(entry, literals) for entry in log.entries]
    hoisted = _hoist(rendered)
    defined: set[str] = set()
    bound: dict[tuple[int, str], str] = {}  # (entry, "result" / "arg" path step) -> name
    written = {(w.origin, w.where if w.where == "result" else repr(w.path[0])) for w in log.writes}
    # The adapter's calls the reference cannot answer for: its own engine loop (SPEC.md
    # fixes invariants, not one schedule) and calls the reference cannot replay (a method
    # it lacks). Each is checked against what it gave when graded; the last carries the
    # grader's finding, unless a call checked against the reference comes after it.
    theirs = [
        index
        for index, entry in enumerate(log.entries)
        if isinstance(entry, Call)
        and provenance.get(entry.component) == adapter_name
        and entry.outcome is not None
    ]
    open_calls = [
        index
        for index in theirs
        if log.entries[index].component in _OPEN_WHEN_THEIRS or oracle[index] is None
    ]
    checked_later = bool(open_calls) and any(
        index > max(open_calls) for index in theirs if index not in open_calls
    )
    finding_at = None if checked_later or not open_calls else max(open_calls)
    graded = _Graded(Labels(), frozenset(open_calls), finding_at, _finding(context))
    own_ids = _identity_bindings(log.entries, context.isolated)
    own_names: dict[int, str] = {}
    step = 0
    for index, (entry, (_target, args), outcome) in enumerate(
        zip(log.entries, rendered, oracle, strict=True)
    ):
        for write in log.writes_before(index):
            body.append(_write_line(write, bound))
        body += _comments(log.notes[notes_done : entry.notes_before])
        notes_done = max(notes_done, entry.notes_before)
        shown = [hoisted.get(a, a) for a in args]
        fresh = _fresh_args(index, entry, args, step + 1, written)
        for position, literal in enumerate(args):
            name = hoisted.get(literal)
            if name and name not in defined and position not in fresh and (
                (index, position) not in own_ids
            ):
                body.append(f"{name} = {literal}")
                defined.add(name)
        for position, (name, literal, spelled, key) in fresh.items():
            body.append(f"{name} = {literal}")
            bound[(index, key)] = name
            shown[position] = spelled
        for position, literal in enumerate(args):
            identity = own_ids.get((index, position))
            if identity is not None and position not in fresh:
                shown[position] = _own_object(literal, identity, own_names, body)
        shown_args = ", ".join(shown)
        if isinstance(entry, Construction):
            owner = owners.get(entry.component, "REFERENCE")
            literals.uses_reference |= owner == "REFERENCE"
            built = f"{entry.var} = {owner}.{entry.component}({shown_args})"
            wrapper = _construction(entry, outcome, error_names)
            if wrapper is None:
                body.append(built)
                continue
            step += 1
            quoted_built = built if len(built) <= 100 else built[:97] + "..."
            body += [wrapper.format(step=step, quoted=repr(quoted_built)), f"    {built}"]
            continue
        step += 1
        call = f"{entry.var}.{entry.member}" + (f"({shown_args})" if entry.kind == "call" else "")
        lines = _step(
            step, call, entry, outcome, provenance, adapter_name, literals, error_names,
            graded.of(index, entry),
        )
        body += lines
        if (index, "result") in written and " as got:" in lines[0]:
            bound[(index, "result")] = f"result{step}"
            body.append(f"result{step} = got.value")
    body += _comments(log.notes[notes_done:])
    header = _header(context, step, own_engine=bool(open_calls))
    imports = _imports(literals.imports, error_names)
    lines = [
        "#!/usr/bin/env python3",
        header,
        "from __future__ import annotations",
        "",
        _runtime_source().rstrip(),
        "",
        "",
        _LOADER.replace("@CHECKOUT@", repr(str(_CHECKOUT_ROOT)))
        .replace("@PACKAGE@", repr(PREFIX.rstrip(".")))
        .replace("@REFERENCE@", repr(PREFIX + "reference.adapter")),
        "",
        "install()",
        f"ADAPTER = load_adapter(adapter_ref({context.adapter_ref!r}))",
    ]
    if literals.uses_reference:
        lines.append(f"{REFERENCE_LINE}  # components the adapter lacks")
    lines += [*imports, "", "# --- the minimal failing example ---", *body, ""]
    lines.append(
        f'print("\\nAll {step} checked steps gave what the specification expects.")'
    )
    lines.append("finish(PASSED)")
    return "\n".join(lines) + "\n", step


def _identity_bindings(
    entries: Sequence[Construction | Call], isolated: bool
) -> dict[tuple[int, int], tuple[int, int]]:
    """(entry, argument position) -> (the object's identity, how many arguments are that
    object), for the arguments that need an object of their own in the script: those
    holding content (bytes, an array, a spec value, directly or as an element) that
    another, distinct argument object also holds. Equal literals would otherwise be one
    object (Python shares equal constants), or a freed object's id be reused, and an
    implementation that keys by identity would not fail as graded. Graded ``isolated``,
    every call's arguments were new objects in the child: each is its own."""
    holders: dict[str, set[int]] = {}
    places: list[tuple[int, int, int, list[str]]] = []
    for index, entry in enumerate(entries):
        values = [*entry.args, *(entry.kwargs.values() if isinstance(entry, Call) else ())]
        for position, (value, live_id) in enumerate(zip(values, entry.arg_ids, strict=False)):
            identity = -len(places) - 1 if isolated else live_id
            atoms = _atoms(value)
            places.append((index, position, identity, atoms))
            for atom in atoms:
                holders.setdefault(atom, set()).add(identity)
    shared = {atom for atom, ids in holders.items() if len(ids) >= 2}
    chosen = [(i, p, identity) for i, p, identity, atoms in places if shared.intersection(atoms)]
    uses = Counter(identity for _i, _p, identity in chosen)
    return {(i, p): (identity, uses[identity]) for i, p, identity in chosen}


def _own_object(
    literal: str, identity: tuple[int, int], names: dict[int, str], body: list[str]
) -> str:
    """How a call spells an argument that needs an object of its own: ``fresh(...)``
    (a new equal object, kept alive to the end of the script), named once when the
    graded run passed that one object to several calls."""
    keyword, _, value = literal.partition("=") if _KEYWORD.match(literal) else ("", "", literal)
    key, uses = identity
    spelled = f"fresh({value})"
    if uses >= 2:
        name = names.get(key)
        if name is None:
            name = names[key] = f"object_{len(names) + 1}"
            body.append(f"{name} = {spelled}  # one object, passed {uses} times as when graded")
        spelled = name
    return f"{keyword}={spelled}" if keyword else spelled


def _atoms(value: object) -> list[str]:
    """What an argument holds whose identity an implementation might key by: itself and
    its elements, when bytes, arrays or spec values (in :func:`normal` form)."""

    def content(v: object) -> bool:
        return isinstance(v, (bytes, np.ndarray)) or (
            dataclasses.is_dataclass(v) and not isinstance(v, type)
        )

    inner = list(value) if isinstance(value, (tuple, list)) else []
    return [repr(normal(v)) for v in (value, *inner) if content(v)]


@dataclass(frozen=True)
class _Graded:
    """How the adapter's ``calls`` that the reference cannot answer for are checked: each
    against what it gave when graded (``labels`` numbers embeddings as the script will),
    the one at ``finding_at`` with the grader's ``finding``."""

    labels: Labels
    calls: frozenset[int]
    finding_at: int | None
    finding: str

    def of(self, index: int, entry: Call) -> tuple[object, str] | None:
        """Called once per entry, in order (the labels number as the script will)."""
        if index not in self.calls or entry.outcome is None:
            return None
        value: object = entry.outcome.value if isinstance(entry.outcome, Returned) else None
        if isinstance(entry.outcome, Raised):
            form: object = ("raises", entry.outcome.error_type.__name__)
        else:
            form = graded_form(value, self.labels)
        return form, self.finding if index == self.finding_at else ""


def _finding(context: ScriptContext) -> str:
    clause = context.clause_id or "an error"
    message = context.message if len(context.message) <= 300 else context.message[:297] + "..."
    return f"{clause}: {message}"


def _arg_steps(entry: Call) -> list[PathStep]:
    return [("arg", i) for i in range(len(entry.args))] + [("kwarg", k) for k in entry.kwargs]


def _fresh_args(
    index: int,
    entry: Construction | Call,
    args: Sequence[str],
    step: int,
    written: set[tuple[int, str]],
) -> dict[int, tuple[str, str, str, str]]:
    """The arguments of entry ``index`` the caller writes into later: each gets a name of
    its own (``arg<step>_<position>``), so the write reaches the object the call got.
    Position -> (name, literal, how the call spells it, its path step's key)."""
    if not isinstance(entry, Call):
        return {}
    fresh: dict[int, tuple[str, str, str, str]] = {}
    for position, (kind, key) in enumerate(_arg_steps(entry)):
        if (index, repr((kind, key))) not in written:
            continue
        name = f"arg{step}_{key}"
        if kind == "kwarg":
            literal, spelled = args[position].split("=", 1)[1], f"{key}={name}"
        else:
            literal, spelled = args[position], name
        fresh[position] = (name, literal, spelled, repr((kind, key)))
    return fresh


def _write_line(write: Write, bound: Mapping[tuple[int, str], str]) -> str:
    """The caller's write, as the script makes it."""
    if write.where == "result":
        base, path = bound.get((write.origin, "result")), write.path
        what = "a result it was given (it owns it)"
    else:
        base, path = bound.get((write.origin, repr(write.path[0]))), write.path[1:]
        what = "a buffer it handed over (the implementation must not keep it)"
    if base is None:
        return f"# (the caller wrote into {what}, which this replay does not hold)"
    where = base + "".join(
        f".{key}" if kind == "attr" else f"[{key!r}]" for kind, key in path
    )
    return f"{where}[...] = {_fill(write.contents)}  # the caller writes into {what}"


def _fill(contents: np.ndarray[Any, Any]) -> str:
    flat = contents.reshape(-1)
    if flat.size and bool(np.all((flat == flat[0]) | (np.isnan(flat) & np.isnan(flat[0])))):
        first = flat[0].item()
        if isinstance(first, float) and not np.isfinite(first):
            return f"float({repr(first)!r})"
        return repr(first)
    return _array_literal(contents)


def _render_entry(
    entry: Construction | Call, literals: _Literals
) -> tuple[str, list[str]]:
    args = [literals.render(a) for a in entry.args]
    if isinstance(entry, Call):
        args += [f"{k}={literals.render(v)}" for k, v in entry.kwargs.items()]
    return entry.var, args


def _hoist(rendered: Sequence[tuple[str, list[str]]]) -> dict[str, str]:
    """Names for argument literals: every request (``request_r1``), and any long literal
    used more than once (``value_1``)."""
    counts = Counter(a for _, args in rendered for a in args)
    names: dict[str, str] = {}
    taken: set[str] = set()
    values = 0
    for _, args in rendered:
        for literal in args:
            if literal in names or _KEYWORD.match(literal):
                continue
            request = _REQUEST.match(literal)
            if request:
                base = f"request_{request.group(1)}"
            elif counts[literal] >= 2 and len(literal) >= 40:
                values += 1
                base = f"value_{values}"
            else:
                continue
            name, suffix = base, 2
            while name in taken:
                name, suffix = f"{base}_{suffix}", suffix + 1
            taken.add(name)
            names[literal] = name
    return names


_KEYWORD = re.compile(r"^[A-Za-z_]\w*=")
_REQUEST = re.compile(r"^RequestView\(request_id='([A-Za-z0-9_]+)'")


def _construction(
    entry: Construction, oracle: Outcome | None, error_names: set[tuple[str, str]]
) -> str | None:
    """The ``with`` line around a construction that raised, on either side (a probe
    meant to raise, such as an invalid configuration): ``{step}`` and ``{quoted}`` to
    fill in. None: a plain construction."""
    if isinstance(oracle, Raised) and oracle.error_type.__module__ == _ERRORS_MODULE:
        name = oracle.error_type.__name__
        error_names.add((_ERRORS_MODULE, name))
        return f"with raises({{step}}, {{quoted}}, {name}):"
    if isinstance(oracle, Raised):
        return "with tolerate({step}, {quoted}):"
    if isinstance(entry.outcome, Raised):
        return "with builds({step}, {quoted}):"
    return None


def _step(
    step: int,
    call: str,
    entry: Call,
    oracle: Outcome | None,
    provenance: Mapping[str, str],
    adapter_name: str,
    literals: _Literals,
    error_names: set[tuple[str, str]],
    graded: tuple[object, str] | None = None,
) -> list[str]:
    shown = call if len(call) <= 100 else call[:97] + "..."
    quoted = repr(shown)
    theirs = provenance.get(entry.component) == adapter_name
    if theirs and graded is not None:
        # No reference value to compare with (an engine loop, where SPEC.md fixes
        # invariants rather than one schedule, or a method the reference lacks): the call
        # must give what it gave when graded (the same run); one of them carries the
        # grader's finding.
        form, finding = graded
        tail = f", {finding!r}" if finding else ""
        return [
            f"with as_graded({step}, {quoted}, {form!r}{tail}) as got:",
            f"    got.value = {call}",
        ]
    if entry.component in _OPEN_WHEN_THEIRS and theirs:
        oracle = None
    if isinstance(oracle, Raised) and oracle.error_type.__module__ == _ERRORS_MODULE:
        name = oracle.error_type.__name__
        error_names.add((_ERRORS_MODULE, name))
        message = f", {oracle.message!r}" if name in _MESSAGE_FIXED else ""
        return [f"with raises({step}, {quoted}, {name}{message}):", f"    {call}"]
    student_raised = isinstance(entry.outcome, Raised)
    unchecked = [f"with check({step}, {quoted}) as got:", f"    got.value = {call}"]
    if not isinstance(oracle, Returned):
        if student_raised:
            return [f"with tolerate({step}, {quoted}):", f"    {call}"]
        return unchecked
    mode = _MODES.get((entry.component, entry.member), "exact")
    if entry.component == "engine_loop":
        mode = _ENGINE_MODE
    try:
        want = literals.render(oracle.value)
    except Unrenderable:
        if mode != "exact":
            return unchecked
        want = f"Form({normal(oracle.value)!r})"
    mode_arg = "" if mode == "exact" else f", {mode!r}"
    lines = [f"with check({step}, {quoted}, {want}{mode_arg}) as got:", f"    got.value = {call}"]
    if mode.startswith("opaque"):
        lines[0] += "  # the reference's value: only which results are equal matters"
    return lines


def _comments(notes: Sequence[str]) -> list[str]:
    lines: list[str] = []
    for note in notes:
        parts = note.strip("\n").splitlines()
        if not parts or is_hypothesis_line(parts[0]):
            continue
        lines += [f"# {part.rstrip()}" for part in parts if part.strip()]
    return lines


def _imports(modules: Mapping[str, set[str]], errors: set[tuple[str, str]]) -> list[str]:
    wanted = {m: set(names) for m, names in modules.items()}
    for module, name in errors:
        wanted.setdefault(module, set()).add(name)
    return [
        f"from {module} import {', '.join(sorted(names))}"
        for module, names in sorted(wanted.items())
    ]


def _header(context: ScriptContext, steps: int, own_engine: bool = False) -> str:
    clause = f"{context.clause_id} — {context.clause_title}" if context.clause_id else "an error"
    return "\n".join(
        [
            '"""Reproducer: ' + _docstring_safe(f"{context.item}: {clause}."),
            "",
            _docstring_safe(context.statement),
            "",
            "When graded, the property `" + context.property_name + "` found: "
            + _docstring_safe(context.message),
            "",
            f"This script replays, as {steps} plain call{'' if steps == 1 else 's'}, what "
            "that property did to your",
            "implementation in its minimal failing example, and after each call checks what",
            "the specification expects (the reference implementation's result for the same",
            "call; content hashes and embeddings by their pattern of equalities). It needs",
            *(_NEEDS_INSTALLED if INSTALLED else _NEEDS_CHECKOUT),
            *(_OWN_ENGINE if own_engine else ()),
            "",
            *(_RUN_INSTALLED if INSTALLED else _RUN_CHECKOUT),
            "The failure reproduces when it stops at a step with 'REPRODUCED'; once fixed,",
            "it runs to the end. Its exit status says which happened:",
            *_STATUSES,
            "To replay the property itself:",
            "    " + _docstring_safe(context.command),
            '"""',
        ]
    )


#: The exit statuses of a script (replay_runtime.PASSED, ...), as its docstring (and so
#: its --help) lists them.
_STATUSES = (
    f"    {PASSED}  it ran to its end: every checked step gave what the specification expects",
    f"    {REPRODUCED}  REPRODUCED: a step gave something else (the failure reproduces)",
    f"    {CANNOT_RUN}  it cannot run here: no mmspec checkout, an adapter that does not load,",
    "       or bad usage",
    f"    {CRASHED}  it stopped outside any checked step: an exception (its traceback is",
    "       printed), or something called sys.exit()",
    f"    {NOT_REPLAYED}  NOT REPLAYED: a call checked against the graded run gave something else",
)


_NEEDS_CHECKOUT = (
    "only numpy and this checkout's spec/ (and reference/ for components you lack).",
)
_RUN_CHECKOUT = (
    "Run it from any folder (it finds the mmspec checkout: $MMSPEC_HOME, else a",
    "folder above it or the current one, else the checkout that wrote it):",
    "    python THIS_FILE.py [path/to/your/adapter.py]",
    "    MMSPEC_HOME=/path/to/mmspec python THIS_FILE.py ...   # on another machine",
    "    python THIS_FILE.py --help                            # this text",
)
_NEEDS_INSTALLED = (
    "only numpy and the installed mmspec's spec (and its reference for components you",
    "lack).",
)
_RUN_INSTALLED = (
    "Run it from any folder (it finds mmspec: $MMSPEC_HOME, else a folder above it or",
    "the current one that holds the mmspec package, else the mmspec this Python",
    "imports, else the one that wrote it):",
    "    python THIS_FILE.py [path/to/your/adapter.py]",
    "    MMSPEC_HOME=/folder/holding/mmspec python THIS_FILE.py ...   # another copy",
    "    python THIS_FILE.py --help                                   # this text",
)

_OWN_ENGINE = (
    "Calls the reference cannot answer for (your engine loop, where SPEC.md fixes",
    "invariants rather than one schedule, or a method the reference lacks) are checked",
    "against what they gave when graded instead: the failure reproduces when the call",
    "after which the grader found the violation gives the same again; a call that gives",
    "something else stops the script (NOT REPLAYED). The caller's writes into what it",
    "was given or handed over are made as when graded.",
)


def _docstring_safe(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', "'''")


def _runtime_source() -> str:
    """replay_runtime.py without its module docstring and ``__future__`` import."""
    text = _RUNTIME_PATH.read_text(encoding="utf-8")
    marker = "from __future__ import annotations\n"
    body = text.split(marker, 1)[1]
    title = "# --- runtime: checks and messages (from harness/grading/replay_runtime.py) ---"
    return title + body


_LOADER = '''# --- loading the adapter ---
import importlib
import importlib.util
import os
from pathlib import Path

#: The checkout that wrote this script (used when no other is found).
WRITTEN_IN = @CHECKOUT@
#: "" when a checkout wrote it (spec/ is top-level); "mmspec" when the installed
#: distribution did (its folders are mmspec/spec/, ...; the root is the folder holding it).
PACKAGE = @PACKAGE@


def is_checkout(folder: Path) -> bool:
    return (folder / PACKAGE / "spec" / "SPEC.md").is_file()


def checkout() -> Path:
    """The mmspec checkout: $MMSPEC_HOME, else a folder above this script or the cwd,
    else (installed) the mmspec this interpreter imports, else the one that wrote this
    script."""
    home = os.environ.get("MMSPEC_HOME")
    where = os.path.join(PACKAGE, "spec", "SPEC.md")
    if home:
        if not is_checkout(Path(home)):
            not_one = f"MMSPEC_HOME={home} is not an mmspec checkout (it has no {where})"
            finish(CANNOT_RUN, not_one)
        return Path(home).resolve()
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        for folder in (start, *start.parents):
            if is_checkout(folder):
                return folder
    found = importlib.util.find_spec(PACKAGE) if PACKAGE else None
    if found is not None and found.origin and is_checkout(Path(found.origin).parents[1]):
        return Path(found.origin).resolve().parents[1]
    if is_checkout(Path(WRITTEN_IN)):
        return Path(WRITTEN_IN)
    finish(
        CANNOT_RUN,
        "cannot find the mmspec checkout: run this script inside one, "
        "or set MMSPEC_HOME=/path/to/mmspec",
    )


def adapter_ref(graded: str) -> str:
    """The adapter to replay against: the script's one argument, else the graded one."""
    given = sys.argv[1:]
    if given[:1] in (["-h"], ["--help"]):
        print(__doc__)
        finish(PASSED)
    if len(given) > 1:
        finish(CANNOT_RUN, f"usage: python {sys.argv[0]} [path/to/your/adapter.py] (or --help)")
    return given[0] if given else graded


def load_adapter(ref: str) -> Any:
    """ADAPTER of a module name, a .py file or a package directory (or exit CANNOT_RUN,
    with why)."""
    root = str(checkout())
    try:
        return import_adapter(ref, root)
    except Exception:
        traceback.print_exc()
        finish(CANNOT_RUN, f"cannot load the adapter {ref!r} (the traceback above says why)")


def import_adapter(ref: str, root: str) -> Any:
    if root not in sys.path:
        sys.path.insert(0, root)
    STAND_IN_FOLDERS.append(os.path.realpath(os.path.join(root, PACKAGE, "reference")))
    PASSIVE_FOLDERS.append(os.path.realpath(os.path.join(root, PACKAGE, "spec")))
    if ref == "reference":
        ref = @REFERENCE@
    path = Path(ref)
    if not (ref.endswith(".py") or "/" in ref or "\\\\" in ref or path.is_dir()):
        return importlib.import_module(ref).ADAPTER
    path = path.resolve()
    file = path / "__init__.py" if path.is_dir() else path
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.append(folder)  # the adapter's own modules, after the checkout's
    spec = importlib.util.spec_from_file_location(
        "graded_adapter", file, submodule_search_locations=[str(path)] if path.is_dir() else None
    )
    assert spec is not None and spec.loader is not None, f"cannot load {ref}"
    module = importlib.util.module_from_spec(spec)
    sys.modules["graded_adapter"] = module
    spec.loader.exec_module(module)
    return module.ADAPTER'''


# --- running it ---------------------------------------------------------------------

#: Sets the grading child's limits (as harness/isolation/child.py does, before any
#: code under test is imported), then runs the script read from stdin as ``__main__``.
_BOOT = (
    "import resource, sys\n"
    "memory, cpu, name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]\n"
    "if memory > 0: resource.setrlimit(resource.RLIMIT_AS, (memory, memory))\n"
    "if cpu > 0: resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))\n"
    "source = sys.stdin.read(); sys.argv = [name]\n"
    "exec(compile(source, name, 'exec'), {'__name__': '__main__', '__file__': name})\n"
)
#: How much of the script's output is read back (its tail), and how much of it a
#: report shows: the output is the graded code's as much as the script's.
_OUTPUT_READ = 64 * 1024
_DETAIL_LINES = 12
_DETAIL_LINE_CHARS = 400
_REPRODUCED = "\nREPRODUCED: "
_NOT_REPLAYED = "\nNOT REPLAYED: "
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def untrusted_text(text: str, lines: int = _DETAIL_LINES) -> str:
    """Output of a script run against the graded code, safe to put in a report: control
    characters shown as escapes, at most ``lines`` lines of bounded length, and no code
    fence that could close the report's."""
    given = text.strip("\n").splitlines()
    shown = []
    for line in given[:lines]:
        line = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), line)
        line = line.replace("`" * 3, "'" * 3)
        if len(line) > _DETAIL_LINE_CHARS:
            line = line[: _DETAIL_LINE_CHARS - 3] + "..."
        shown.append(line.rstrip())
    if len(given) > lines:
        shown.append("...")
    return "\n".join(shown)


def _tail(file: IO[bytes]) -> str:
    file.flush()
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - _OUTPUT_READ))
    return file.read().decode("utf-8", "replace")


def verify_script(
    script: str,
    filename: str,
    limits: Limits | None = None,
    timeout: float | None = None,
    cwd: str | None = None,
) -> Verification:
    """Run the script against the graded adapter (its default argument) the way grading
    runs the adapter (:mod:`harness.isolation`): a fresh interpreter in a session of
    its own, behind the same command prefix, under the same memory and CPU-time limits,
    with the property's wall-clock limit for the whole script (``timeout`` overrides
    it), killed with its process group when it is done or that runs out. It reproduces
    the failure only when it stops at a step with REPRODUCED; its output is untrusted
    (bounded and escaped in what is returned)."""
    limits = limits or Limits()
    if limits.sandbox is not None and REFERENCE_LINE in script:
        return Verification(False, None, REFERENCE_KEPT_FROM_SANDBOX, skipped=True)
    seconds = limits.property_seconds if timeout is None else timeout
    command = limits.command(
        [
            sys.executable,
            "-c",
            _BOOT,
            str(limits.memory_bytes),
            str(limits.cpu_seconds),
            filename,
        ]
    )
    env = dict(os.environ, MMSPEC_HOME=str(_CHECKOUT_ROOT), PYTHONHASHSEED="0")
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = "1"
    with tempfile.TemporaryDirectory(prefix="mmspec-reproducer-") as folder:
        with Path(folder, "stdout").open("w+b") as out, Path(folder, "stderr").open("w+b") as err:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                cwd=cwd or os.getcwd(),
                env=env,
                start_new_session=True,
            )
            timed_out = False
            try:
                assert process.stdin is not None
                try:
                    # as the report will show it: controls and lone surrogates escaped
                    # (in a string literal the escape means the same character)
                    process.stdin.write(printable(script).encode("utf-8"))
                    process.stdin.close()
                except BrokenPipeError:
                    pass
                code = process.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                timed_out = True
                code = -1
            finally:
                limits.bury(process)  # whatever it started, in any session
            stdout, stderr = _tail(out), _tail(err)
    return _judge(code, timed_out, seconds, stdout, stderr, limits)


_STEP_DONE = re.compile(r"^step (\d+): ", re.MULTILINE)


def _judge(
    code: int, timed_out: bool, seconds: float, stdout: str, stderr: str, limits: Limits
) -> Verification:
    """What the script's exit status and output show (both untrusted)."""
    steps = [int(n) for n in _STEP_DONE.findall(stdout)]
    after = f" after step {steps[-1]}" if steps else " before its first step"
    if timed_out:
        return Verification(
            False, None, f"did not reproduce: it ran past the time limit of {seconds:g} s{after}"
        )
    if code == PASSED:
        return Verification(False, None, "it ran to the end without a mismatch", completed=True)
    if code == REPRODUCED and _REPRODUCED in stderr:
        detail = untrusted_text(stderr.rsplit(_REPRODUCED, 1)[1])
        step = re.match(r"step (\d+)", detail)
        by_stand_in = f"\n  {THE_RUN} gave:" in detail
        return Verification(True, int(step.group(1)) if step else None, detail, False, by_stand_in)
    if code == NOT_REPLAYED and _NOT_REPLAYED in stderr:
        detail = untrusted_text(stderr.rsplit(_NOT_REPLAYED, 1)[1])
        return Verification(False, None, "did not replay the graded run: " + detail)
    last = [line.strip() for line in stderr.splitlines() if line.strip()]
    if code < 0:
        how = describe_exit(code, limits)
    elif code == CANNOT_RUN and last:
        how = f"it could not run: {last[-1]}"
    elif last:  # CRASHED, or a status no script gives (the code under test exited)
        how = f"it stopped with {last[-1]}"
    else:
        how = f"it exited with status {code}"
    return Verification(False, None, "did not reproduce: " + untrusted_text(how + after, 1))


def make_reproducer(
    log: CallLog,
    reference: Adapter,
    provenance: Mapping[str, str],
    adapter_name: str,
    context: ScriptContext,
    filename: str,
    verify: Callable[[str, str], Verification] | None = verify_script,
) -> Reproducer:
    """Build the script for ``log`` (raises :class:`Unrenderable`) and, with ``verify``,
    run it once and state the result in its header."""
    oracle = oracle_outcomes(log, reference)
    script, steps = build_script(log, oracle, provenance, adapter_name, context)
    if verify is None:
        return Reproducer(filename, script, steps)
    verification = verify(script, filename)
    script = script.replace(
        '"""\nfrom __future__ import annotations',
        f'\nWhen graded: {_docstring_safe(_verdict(verification))}\n"""\n'
        "from __future__ import annotations",
        1,
    )
    return Reproducer(filename, script, steps, verification)


def _verdict(verification: Verification) -> str:
    if verification.skipped:
        return f"this script was {verification.detail}."
    if verification.reproduces:
        where = f"at step {verification.step}" if verification.step else "before the first step"
        return f"this script stopped {where} against the graded adapter (REPRODUCED)."
    if verification.completed:
        return (
            "this script ran to the end against the graded adapter: every replayed call "
            "gave what the reference gives, and the violation lies in a relation between "
            "results that it does not check; read the message above."
        )
    return f"this script {verification.detail} when run against the graded adapter."

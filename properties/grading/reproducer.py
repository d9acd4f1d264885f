"""Standalone reproducer scripts: a minimal failing test case as plain calls with checks.

From a :class:`~properties.grading.recording.CallLog` (what the property did to the
components in the minimal failing test case) this module writes a Python script that
imports only the student's adapter, ``spec`` and numpy, makes the same calls in the same
order, and after each call checks what the specification expects.

The expectations come from an oracle: the same calls replayed on the reference
implementation (:func:`oracle_outcomes`). The reference is correct per SPEC.md, and for
most results the specification leaves exactly one right answer (what the cache holds,
what the hook schedules, what the splice returns), so those are compared value for
value. Where it leaves the values open — a content hash, an encoder's embeddings, block
hashes — only the pattern of equalities is compared (see
:mod:`properties.grading.replay_runtime`). Where the specification fixes only invariants
(a student's own engine loop may schedule differently), calls are replayed and shown
but not checked. The script is then run once (:func:`verify_script`) to say honestly
whether it reproduces the failure on its own.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from properties.grading.counterexample import is_hypothesis_line
from properties.grading.recording import (
    Call,
    CallLog,
    Construction,
    Outcome,
    Raised,
    Recorded,
    RecordingFactory,
    Returned,
    var_of,
)
from properties.grading.replay_runtime import normal
from spec.adapter import Adapter

_RUNTIME_PATH = Path(__file__).with_name("replay_runtime.py")
_CHECKOUT_ROOT = Path(__file__).resolve().parents[2]

#: How results of each (component, member) are compared; the default is "exact".
_MODES: Mapping[tuple[str, str], str] = {
    ("hasher", "hash_item"): "opaque",
    ("encoder", "encode"): "opaque-arrays",
    ("encoder", "encode_batch"): "opaque-arrays",
    ("block_hasher", "request_block_hashes"): "opaque-strings",
    ("encoder_cache_manager", "freeable"): "ordered",
}
#: Components whose results are checked only when the reference stands behind them:
#: SPEC.md fixes invariants for them, not one right schedule.
_OPEN_WHEN_THEIRS = frozenset({"engine_loop"})
#: Inside the reference engine loop the embeddings come from whichever encoder is used.
_ENGINE_MODE = "opaque-arrays"

_SPEC_MODULES = ("spec.types", "spec.components", "spec.adapter", "spec.errors")
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
    #: The mismatch ("expects ... gave ...") or the exception it stopped with.
    detail: str


@dataclass(frozen=True)
class Reproducer:
    filename: str
    script: str
    steps: int
    verification: Verification | None = None


# --- the oracle ---------------------------------------------------------------------


def oracle_outcomes(log: CallLog, reference: Adapter) -> list[Outcome | None]:
    """Each entry's outcome when the same calls are made on the reference's components
    (None where it cannot be replayed: the object was never built)."""
    objects: dict[str, object] = {}
    outcomes: list[Outcome | None] = []

    def resolve(value: object) -> object:
        return _resolve(value, objects, reference)

    for entry in log.entries:
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
        if target is None:
            outcomes.append(None)
            continue
        try:
            value = getattr(target, entry.member)
            if entry.kind == "call":
                args = [resolve(a) for a in entry.args]
                kwargs = {k: resolve(v) for k, v in entry.kwargs.items()}
                value = value(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - recorded as the outcome
            outcomes.append(Raised(type(e), str(e)))
            continue
        outcomes.append(Returned(log.snapshot(value)))
    return outcomes


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
    step = 0
    for entry, (_target, args), outcome in zip(log.entries, rendered, oracle, strict=True):
        body += _comments(log.notes[notes_done : entry.notes_before])
        notes_done = max(notes_done, entry.notes_before)
        for literal in args:
            name = hoisted.get(literal)
            if name and name not in defined:
                body.append(f"{name} = {literal}")
                defined.add(name)
        shown_args = ", ".join(hoisted.get(a, a) for a in args)
        if isinstance(entry, Construction):
            owner = owners.get(entry.component, "REFERENCE")
            literals.uses_reference |= owner == "REFERENCE"
            body.append(f"{entry.var} = {owner}.{entry.component}({shown_args})")
            continue
        step += 1
        call = f"{entry.var}.{entry.member}" + (f"({shown_args})" if entry.kind == "call" else "")
        body += _step(step, call, entry, outcome, provenance, adapter_name, literals, error_names)
    body += _comments(log.notes[notes_done:])
    header = _header(context, step)
    imports = _imports(literals.imports, error_names)
    lines = [
        "#!/usr/bin/env python3",
        header,
        "from __future__ import annotations",
        "",
        _runtime_source().rstrip(),
        "",
        "",
        _LOADER,
        "",
        "install()",
        f"ADAPTER = load_adapter(sys.argv[1] if len(sys.argv) > 1 else {context.adapter_ref!r})",
    ]
    if literals.uses_reference:
        lines.append('REFERENCE = load_adapter("reference")  # components the adapter lacks')
    lines += [*imports, "", "# --- the minimal failing example ---", *body, ""]
    lines.append(
        f'print("\\nAll {step} checked steps gave what the specification expects.")'
    )
    return "\n".join(lines) + "\n", step


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


def _step(
    step: int,
    call: str,
    entry: Call,
    oracle: Outcome | None,
    provenance: Mapping[str, str],
    adapter_name: str,
    literals: _Literals,
    error_names: set[tuple[str, str]],
) -> list[str]:
    shown = call if len(call) <= 100 else call[:97] + "..."
    quoted = repr(shown)
    theirs = provenance.get(entry.component) == adapter_name
    if entry.component in _OPEN_WHEN_THEIRS and theirs:
        oracle = None  # SPEC.md fixes invariants here, not the values
    if isinstance(oracle, Raised) and oracle.error_type.__module__ == "spec.errors":
        name = oracle.error_type.__name__
        error_names.add(("spec.errors", name))
        message = f", {oracle.message!r}" if name in _MESSAGE_FIXED else ""
        return [f"with raises({step}, {quoted}, {name}{message}):", f"    {call}"]
    student_raised = isinstance(entry.outcome, Raised)
    if not isinstance(oracle, Returned):
        if student_raised:
            return [f"with tolerate({step}, {quoted}):", f"    {call}"]
        return [f"got = {call}", f"observe({step}, {quoted}, got)"]
    mode = _MODES.get((entry.component, entry.member), "exact")
    if entry.component == "engine_loop":
        mode = _ENGINE_MODE
    try:
        want = literals.render(oracle.value)
    except Unrenderable:
        if mode != "exact":
            return [f"got = {call}", f"observe({step}, {quoted}, got)"]
        want = f"Form({normal(oracle.value)!r})"
    mode_arg = "" if mode == "exact" else f", {mode!r}"
    lines = [f"got = {call}", f"expect({step}, {quoted}, got, {want}{mode_arg})"]
    if mode.startswith("opaque"):
        lines[1] += "  # the reference's value: only which results are equal matters"
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


def _header(context: ScriptContext, steps: int) -> str:
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
            "only numpy and this checkout's spec/ (and reference/ for components you lack).",
            "",
            "Run it from your checkout (or set MMSPEC_HOME to the checkout):",
            "    python THIS_FILE.py [path/to/your/adapter.py]",
            "The failure reproduces when it stops at a step with 'REPRODUCED' (exit status",
            "1); once fixed, it runs to the end. To replay the property itself:",
            "    " + _docstring_safe(context.command),
            '"""',
        ]
    )


def _docstring_safe(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', "'''")


def _runtime_source() -> str:
    """replay_runtime.py without its module docstring and ``__future__`` import."""
    text = _RUNTIME_PATH.read_text(encoding="utf-8")
    marker = "from __future__ import annotations\n"
    body = text.split(marker, 1)[1]
    title = "# --- runtime: checks and messages (from properties/grading/replay_runtime.py) ---"
    return title + body


_LOADER = '''# --- loading the adapter ---
import importlib
import importlib.util
import os
from pathlib import Path


def checkout() -> Path:
    """The mmspec checkout: $MMSPEC_HOME, or a folder above this script or the cwd."""
    if os.environ.get("MMSPEC_HOME"):
        return Path(os.environ["MMSPEC_HOME"]).resolve()
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        for folder in (start, *start.parents):
            if (folder / "spec" / "SPEC.md").is_file():
                return folder
    sys.exit("cannot find the mmspec checkout: run from inside it or set MMSPEC_HOME")


def load_adapter(ref: str) -> Any:
    """ADAPTER of a module name, a .py file or a package directory."""
    root = str(checkout())
    if root not in sys.path:
        sys.path.insert(0, root)
    if ref == "reference":
        ref = "reference.adapter"
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

_BOOT = (
    "import sys; name = sys.argv[1]; source = sys.stdin.read(); sys.argv = [name]; "
    "exec(compile(source, name, 'exec'), {'__name__': '__main__', '__file__': name})"
)
_STEP_DONE = re.compile(r"^step (\d+): ", re.MULTILINE)


def verify_script(
    script: str, filename: str, timeout: float = 120.0, cwd: str | None = None
) -> Verification:
    """Run the script against the graded adapter (its default argument), in a fresh
    interpreter, and say whether it reproduces the failure."""
    env = dict(os.environ, MMSPEC_HOME=str(_CHECKOUT_ROOT), PYTHONHASHSEED="0")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _BOOT, filename],
            input=script,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=cwd,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Verification(False, None, f"the script ran past {timeout:.0f} s")
    steps = [int(n) for n in _STEP_DONE.findall(done.stdout)]
    if done.returncode == 0:
        return Verification(False, None, "it ran to the end without a mismatch")
    mismatch = done.stderr.split("REPRODUCED: ", 1)
    if len(mismatch) == 2:
        detail = mismatch[1].strip()
        step = re.match(r"step (\d+)", detail)
        return Verification(True, int(step.group(1)) if step else None, detail)
    last = [line for line in done.stderr.strip().splitlines() if line.strip()]
    failed_at = (steps[-1] + 1) if steps else 1
    where = f"step {failed_at}" if steps else "step 1 (or while building a component)"
    error = last[-1].strip() if last else f"exit status {done.returncode}"
    return Verification(True, failed_at, f"{where}: your implementation raised {error}")


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
    if verification.reproduces:
        where = f"at step {verification.step}" if verification.step else "before the first step"
        return f"this script stopped {where} against the graded adapter."
    return (
        "this script ran to the end against the graded adapter: every replayed call "
        "gave what the reference gives, and the violation lies in a relation between "
        "results that it does not check; read the message above."
    )

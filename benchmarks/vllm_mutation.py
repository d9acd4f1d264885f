"""Regression power against the real engine: first-order mutants of vLLM's own encoder-cache
code, and how many of them the suite's properties turn red (``make vllm-mutation``).

    PYTHONPATH=. .venv-vllm/bin/python benchmarks/vllm_mutation.py \\
        [--file encoder_cache_manager|scheduler|scheduler_free|scheduler_drain] [--limit N]
        [--jobs 1] [--list]

Targets, in the unpacked vLLM 0.33.0 tree (``.vllm-cache/vllm-0.33.0``, or ``--vllm-src``):

- ``vllm/v1/core/encoder_cache_manager.py``: the methods of ``EncoderCacheManager`` and
  ``compute_mm_encoder_budget``, judged by ``EncoderCacheMachine``, SCH-1..11 and
  ``EngineMachine``;
- ``vllm/v1/core/sched/scheduler.py``: ``Scheduler._try_schedule_encoder_inputs`` (the
  scheduling hook), judged by SCH-1..11 and ``EngineMachine``;
- the same file, reached only through vLLM's ``Scheduler`` as the engine loop (issue 16),
  judged by ``EngineMachine``: ``_free_encoder_inputs`` / ``_free_encoder_input``
  (``--file scheduler_free``), and the drain of ``get_freed_mm_hashes()`` into the step's
  ``SchedulerOutput`` in ``schedule()`` (``--file scheduler_drain``: three hand-written
  mutants, the AST operators do not reach a keyword argument).

Mutation points come from Python's ``ast`` within those functions' bodies (docstrings and
signatures excluded); each mutation is applied textually to the source at the node's
position. The operator set (docs/vllm_mutation.md): comparison ``<``/``<=``, ``>``/``>=``,
``==``/``!=``, ``in``/``not in``, ``is``/``is not`` swapped; ``+``/``-`` (and ``+=``/``-=``)
swapped; an integer constant ``±1``; ``True``/``False`` swapped; ``and``/``or`` swapped (all
of one expression's operators); a ``not`` removed; a returned expression (not a constant)
replaced by ``None``; a call statement (``x.append(...)``, ``x.pop(...)``, ...) or a ``del``
replaced by ``pass``. A logger call's arguments are not mutated (deleting the call is a
mutant, declared equivalent: log text has no clause). Mutants are
sorted by position and operator; the id (``ecm-007``, ``hook-031``) is stable for a tree.

Each mutant is written into one hard-linked copy of the tree (the mutated file unlinked
first, then written; re-linked to the pristine file afterwards: nothing is ever written
through a link into the pristine tree) and the properties are run on it in a child
process: ``python -m properties verify --adapter adapters/vllm --profile ci --vllm-src COPY
--only ... --save-report JSON``. The unmutated tree is run first with the same ``--only``.

- *killed*: some row's verdict differs from the unmutated tree's
  (``harness.baseline.differences``);
- *killed at import*: the run crashed (no saved report: vLLM's import or the adapter's
  loading failed on the mutant); counted as detected and listed apart;
- *timeout*: the run went on past ``--timeout-factor`` times the unmutated run's time (at
  least 120 s): an endless loop, a job that never ends; counted as detected;
- *invalid*: the mutated source does not compile (never run, never counted);
- *equivalent*: a mutant read and judged equivalent (``EQUIVALENT`` below, with its
  reason); out of the denominator.

    kill rate = (killed + killed at import + timeout) / (mutants run − equivalent − invalid)

A survivor whose failing rows (the unmutated tree's own findings, e.g. SCH-6 on 0.33.0)
carry other messages than the unmutated tree's is marked so: the mutant changed a failure
that was already there, which a verdict comparison cannot see (not counted as a kill).

``--limit N`` runs a deterministic sample of N mutants per file: evenly spaced over the
sorted ids (``ids[i * total // N]``), so the same N gives the same sample.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.baseline import SavedVerdicts, differences, load_verdicts  # noqa: E402

DEFAULT_TREE = ROOT / ".vllm-cache" / "vllm-0.33.0"
SCH = [f"SCH-{i}" for i in range(1, 12)]


@dataclass(frozen=True)
class Target:
    """One file's mutation scope and the properties that judge it."""

    key: str
    prefix: str
    path: str
    #: ("Class", None): every method of the class; ("Class", "method"); (None, "function")
    scopes: tuple[tuple[str | None, str | None], ...]
    only: tuple[str, ...]
    #: hand-written mutants, for code the AST operators do not reach: (the exact source
    #: text, found once in the file; its replacement; the operator's name)
    manual: tuple[tuple[str, str, str], ...] = ()


#: The drain of freed hashes into the step's SchedulerOutput, in Scheduler.schedule().
_DRAIN = "free_encoder_mm_hashes=self.encoder_cache_manager.get_freed_mm_hashes(),"

TARGETS = {
    "encoder_cache_manager": Target(
        key="encoder_cache_manager",
        prefix="ecm",
        path="vllm/v1/core/encoder_cache_manager.py",
        scopes=(("EncoderCacheManager", None), (None, "compute_mm_encoder_budget")),
        only=("EncoderCacheMachine", *SCH, "EngineMachine"),
    ),
    "scheduler": Target(
        key="scheduler",
        prefix="hook",
        path="vllm/v1/core/sched/scheduler.py",
        scopes=(("Scheduler", "_try_schedule_encoder_inputs"),),
        only=(*SCH, "EngineMachine"),
    ),
    # Reached only through vLLM's Scheduler as the engine loop (issue 16).
    "scheduler_free": Target(
        key="scheduler_free",
        prefix="free",
        path="vllm/v1/core/sched/scheduler.py",
        scopes=(("Scheduler", "_free_encoder_inputs"), ("Scheduler", "_free_encoder_input")),
        only=("EngineMachine",),
    ),
    "scheduler_drain": Target(
        key="scheduler_drain",
        prefix="drain",
        path="vllm/v1/core/sched/scheduler.py",
        scopes=(),
        only=("EngineMachine",),
        manual=tuple(
            (_DRAIN, _DRAIN.replace("self.encoder_cache_manager.get_freed_mm_hashes()", new), op)
            for new, op in (
                ("[]", "the drain dropped: the worker is never told"),
                ("self.encoder_cache_manager.get_freed_mm_hashes()[1:]",
                 "the first freed hash lost"),
                ("list(self.encoder_cache_manager.freed)",
                 "read without draining: every step repeats every hash ever freed"),
            )
        ),
    ),
}

_ENCODER_DECODER = (
    "only encoder-decoder models reach it (is_encoder_decoder is False for a decoder-only "
    "VLM: the branch is skipped, or `and` stops before the mutated operand)"
)
_EC_CONNECTOR = (
    "the ec_connector branch: reached only with an encoder-cache connector (EC transfer) "
    "configured; ec_connector is None otherwise, and the branch's guard is not mutated"
)

#: Mutants read and judged equivalent on vLLM 0.33.0: id -> why no behaviour changes.
EQUIVALENT: dict[str, str] = {
    "ecm-019": "can_allocate: num_embeds == num_free_slots falls through to the eviction loop, "
    "which does not run (num_embeds > num_free_slots is false), and returns True as before",
    "ecm-067": "compute_mm_encoder_budget: deletes the logger.warning of the no-modality "
    "branch; the returned budgets are unchanged",
    "ecm-007": "reset without freed.clear(): reset_encoder_cache runs between steps, after "
    "Scheduler.schedule drained freed (evictions happen only inside schedule), so the "
    "list is already empty (ECM-9)",
    "hook-008": "assert len(mm_features) >= 0: the early return on `not has_encoder_inputs` "
    "already excludes an empty list, so the assertion holds either way",
    "hook-009": "assert len(mm_features) > -1: a length is never negative; same as hook-008",
    "hook-015": _ENCODER_DECODER,
    "hook-016": _ENCODER_DECODER,
    "hook-018": _ENCODER_DECODER,
    "hook-019": _ENCODER_DECODER,
    "hook-020": _ENCODER_DECODER,
    "hook-021": _ENCODER_DECODER,
    "hook-022": _ENCODER_DECODER,
    "hook-023": _ENCODER_DECODER,
    "hook-046": "computed == offset in the no-space branch: min(new, offset - computed) is "
    "min(new, 0) = 0, what the else branch sets",
    "hook-050": "start_idx_rel = max(-1, ...) only feeds the no-embeddings test: with an "
    "is_embed mask a start <= 0 reads as 0; without one, end - (-1) and end - 0 are both "
    "non-zero, since an item in the window has end_idx_rel > 0",
    "hook-060": _EC_CONNECTOR,
    "hook-061": _EC_CONNECTOR,
    "free-003": _ENCODER_DECODER,
    "free-004": _ENCODER_DECODER,
    "free-005": _ENCODER_DECODER,
    "free-006": _ENCODER_DECODER,
    "free-009": "num_computed_tokens + num_output_placeholders: the placeholders are 0 "
    "without async scheduling (the engine loop runs synchronously), so + 0 is - 0",
    "free-013": _EC_CONNECTOR,
}


@dataclass(frozen=True)
class Mutant:
    id: str
    line: int
    operator: str
    #: byte offsets into the source's text (the file is ASCII)
    start: int
    end: int
    replacement: str
    before: str

    def apply(self, source: str) -> str:
        return source[: self.start] + self.replacement + source[self.end :]

    def diff_line(self, source: str) -> str:
        """The mutated line(s), as they read after the mutation (a deleted statement: what
        it was)."""
        if self.operator == "statement deleted":
            return f"deleted: {' '.join(self.before.split())}"
        mutated = self.apply(source)
        first = mutated.rfind("\n", 0, self.start) + 1
        last = mutated.find("\n", self.start + len(self.replacement))
        return " ".join(part.strip() for part in mutated[first:last].splitlines())


# --- finding the mutation points ---------------------------------------------------------


class _Source:
    def __init__(self, text: str) -> None:
        self.text = text
        self.line_starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self.line_starts.append(i + 1)

    def offset(self, line: int, col: int) -> int:
        return self.line_starts[line - 1] + col

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]


_COMPARE_SWAPS: dict[type[ast.cmpop], tuple[str, str]] = {
    ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="), ast.In: ("in", "not in"),
    ast.NotIn: ("not in", "in"), ast.Is: ("is", "is not"), ast.IsNot: ("is not", "is"),
}


def _find_operator(source: _Source, lo: int, hi: int, token: str) -> tuple[int, int] | None:
    """The span of ``token`` in ``source.text[lo:hi]``, outside comments and brackets' text
    (the gap between two operands holds only brackets, blanks, comments and the token)."""
    gap = source.text[lo:hi]
    i = 0
    while i < len(gap):
        if gap[i] == "#":
            newline = gap.find("\n", i)
            i = len(gap) if newline < 0 else newline
            continue
        if gap.startswith(token, i):
            after = i + len(token)
            word = token[-1].isalpha()
            if not word or (after >= len(gap) or not gap[after].isalnum()):
                # "not in" / "is not": take the whole phrase, whatever the blanks
                return lo + i, lo + after
        i += 1
    return None


def _phrase(source: _Source, lo: int, hi: int, words: Sequence[str]) -> tuple[int, int] | None:
    """The span of a two-word operator (``not in``, ``is not``) in the gap."""
    first = _find_operator(source, lo, hi, words[0])
    if first is None or len(words) == 1:
        return first
    second = _find_operator(source, first[1], hi, words[1])
    if second is None or source.text[first[1] : second[0]].strip():
        return None
    return first[0], second[1]


def _is_logger_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "logger"
    )


def _functions(tree: ast.Module, target: Target) -> Iterator[ast.FunctionDef]:
    for node in tree.body:
        for cls, name in target.scopes:
            if cls is None and isinstance(node, ast.FunctionDef) and node.name == name:
                yield node
            if cls is not None and isinstance(node, ast.ClassDef) and node.name == cls:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and name in (None, item.name):
                        yield item


def _body_nodes(function: ast.FunctionDef) -> Iterator[ast.AST]:
    body = function.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]  # the docstring
    logger_calls: set[int] = set()
    for statement in body:
        for node in ast.walk(statement):
            if _is_logger_call(node):
                logger_calls.update(id(n) for n in ast.walk(node))
            if id(node) not in logger_calls:
                yield node


def find_mutants(text: str, target: Target) -> list[Mutant]:
    source = _Source(text)
    tree = ast.parse(text)
    raw: list[tuple[int, int, str, str, str]] = []  # (start, end, operator, replacement, before)

    def add(start: int, end: int, operator: str, replacement: str) -> None:
        raw.append((start, end, operator, replacement, text[start:end]))

    for function in _functions(tree, target):
        for node in _body_nodes(function):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                for op, left, right in zip(node.ops, operands[:-1], operands[1:], strict=True):
                    old, new = _COMPARE_SWAPS[type(op)]
                    span = _phrase(source, source.end(left), source.start(right), old.split())
                    if span is not None:
                        add(*span, f"{old} -> {new}", new)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
                old, new = ("+", "-") if isinstance(node.op, ast.Add) else ("-", "+")
                span = _find_operator(source, source.end(node.left), source.start(node.right), old)
                if span is not None:
                    add(*span, f"{old} -> {new}", new)
            elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add | ast.Sub):
                old, new = ("+=", "-=") if isinstance(node.op, ast.Add) else ("-=", "+=")
                span = _find_operator(
                    source, source.end(node.target), source.start(node.value), old
                )
                if span is not None:
                    add(*span, f"{old} -> {new}", new)
            elif isinstance(node, ast.Constant) and type(node.value) is bool:
                add(source.start(node), source.end(node), f"{node.value} -> {not node.value}",
                    str(not node.value))
            elif isinstance(node, ast.Constant) and type(node.value) is int:
                for delta in (1, -1):
                    add(source.start(node), source.end(node),
                        f"{node.value} -> {node.value + delta}", str(node.value + delta))
            elif isinstance(node, ast.BoolOp):
                old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
                start, end = source.start(node), source.end(node)
                pieces: list[str] = []
                position = start
                for left, right in zip(node.values, node.values[1:], strict=False):
                    span = _find_operator(source, source.end(left), source.start(right), old)
                    if span is None:
                        break
                    pieces += [text[position : span[0]], new]
                    position = span[1]
                else:
                    pieces.append(text[position:end])
                    add(start, end, f"{old} -> {new}", "".join(pieces))
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                start, inner = source.start(node), source.start(node.operand)
                gap = text[start:inner]
                if gap.startswith("not"):
                    add(start, inner, "not removed", gap[3:].lstrip(" ") or "")
            elif (
                isinstance(node, ast.Return)
                and node.value is not None
                and not isinstance(node.value, ast.Constant)
            ):
                add(source.start(node.value), source.end(node.value), "return None", "None")
            elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)) or isinstance(
                node, ast.Delete
            ):
                add(source.start(node), source.end(node), "statement deleted", "pass")

    for snippet, replacement, operator in target.manual:
        if text.count(snippet) != 1:
            raise ValueError(f"{target.path}: {snippet!r} is not found exactly once")
        start = text.index(snippet)
        add(start, start + len(snippet), operator, replacement)

    raw = sorted(set(raw))
    mutants = []
    for number, (start, end, operator, replacement, before) in enumerate(raw, 1):
        line = text.count("\n", 0, start) + 1
        mutants.append(Mutant(f"{target.prefix}-{number:03d}", line, operator, start, end,
                              replacement, before))
    return mutants


def sample(mutants: list[Mutant], limit: int | None) -> list[Mutant]:
    if limit is None or limit >= len(mutants):
        return mutants
    return [mutants[i * len(mutants) // limit] for i in range(limit)]


# --- running ------------------------------------------------------------------------------


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed, killed at import, survived, invalid, equivalent
    seconds: float
    detail: str = ""


def hard_linked_copy(tree: Path, into: Path) -> Path:
    copy = into / "vllm-mutated"
    try:
        shutil.copytree(tree / "vllm", copy / "vllm", copy_function=os.link)
    except OSError:  # another filesystem: copy for real
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(tree / "vllm", copy / "vllm")
    return copy


def verify(copy: Path, only: Sequence[str], saved: Path, timeout: float) -> tuple[str, float]:
    """Run the properties on ``copy``; ("ok" | "crash: ..." | "timeout", seconds)."""
    command = [
        sys.executable, "-m", "properties", "verify", "--adapter", "adapters/vllm",
        "--profile", "ci", "--vllm-src", str(copy), "--only", *only,
        "--save-report", str(saved),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MMSPEC_VLLM_SRC", None)
    saved.unlink(missing_ok=True)
    started = time.perf_counter()
    try:
        completed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                                   timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - started
    seconds = time.perf_counter() - started
    if completed.returncode not in (0, 1) or not saved.is_file():
        tail = [line for line in completed.stderr.strip().splitlines() if line.strip()]
        return f"crash: {tail[-1] if tail else f'exit {completed.returncode}'}", seconds
    return "ok", seconds


def _drop_bytecode(path: Path) -> None:
    cache = path.parent / "__pycache__"
    if cache.is_dir():
        for pyc in cache.glob(f"{path.stem}.*.pyc"):
            pyc.unlink()


def _masked(baseline: SavedVerdicts, current: SavedVerdicts) -> str:
    """For a survivor: the rows that fail on both trees but with other messages (the
    mutant changed a failure the unmutated tree already has; not counted as a kill)."""
    before = baseline.by_key()
    rows = [
        row.clause for row in current.rows
        if row.verdict != "pass" and (row.clause, row.property) in before
        and before[(row.clause, row.property)].messages != row.messages
    ]
    return f"messages differ in the failing {', '.join(rows)}" if rows else ""


def run_file(target: Target, tree: Path, workdir: Path, limit: int | None,
             timeout_factor: float, ids: Sequence[str] = ()) -> tuple[list[Outcome], int, float]:
    """Every sampled mutant's outcome, the number of mutants generated, baseline seconds."""
    pristine = tree / target.path
    text = pristine.read_text(encoding="utf-8")
    mutants = find_mutants(text, target)
    chosen = [m for m in mutants if m.id in ids] if ids else sample(mutants, limit)
    copy = hard_linked_copy(tree, workdir / target.key)
    file_in_copy = copy / target.path

    base_json = workdir / f"{target.key}-unmutated.json"
    status, base_seconds = verify(copy, target.only, base_json, timeout=1800)
    if status != "ok":
        raise SystemExit(f"the unmutated tree's run failed: {status}")
    baseline = load_verdicts(base_json)
    base_failing = [f"{r.clause} {r.verdict}" for r in baseline.rows if r.verdict != "pass"]
    print(f"\n== {target.path} ({target.key}): {len(mutants)} mutants, running {len(chosen)}; "
          f"unmutated tree {base_seconds:.0f} s, rows not pass: {', '.join(base_failing) or '-'}",
          flush=True)
    timeout = max(120.0, timeout_factor * base_seconds)

    outcomes = []
    for mutant in chosen:
        mutated = mutant.apply(text)
        if mutant.id in EQUIVALENT:
            outcomes.append(Outcome(mutant, "equivalent", 0.0, EQUIVALENT[mutant.id]))
        else:
            try:
                compile(mutated, str(pristine), "exec")
            except SyntaxError as e:
                outcomes.append(Outcome(mutant, "invalid", 0.0, str(e)))
            else:
                file_in_copy.unlink()  # a hard link: never write through it
                file_in_copy.write_text(mutated, encoding="utf-8")
                _drop_bytecode(file_in_copy)
                saved = workdir / f"{mutant.id}.json"
                status, seconds = verify(copy, target.only, saved, timeout)
                file_in_copy.unlink()
                os.link(pristine, file_in_copy)
                _drop_bytecode(file_in_copy)
                if status == "ok":
                    current = load_verdicts(saved)
                    changed = differences(baseline, current)
                    if changed:
                        detail = ", ".join(f"{d.clause} {d.before}->{d.after}" for d in changed[:4])
                        outcomes.append(Outcome(mutant, "killed", seconds, detail))
                    else:
                        outcomes.append(Outcome(mutant, "survived", seconds,
                                                _masked(baseline, current)))
                else:
                    kind = "timeout" if status == "timeout" else "killed at import"
                    outcomes.append(Outcome(mutant, kind, seconds, status))
        outcome = outcomes[-1]
        print(f"  {mutant.id} line {mutant.line} {mutant.operator}: {outcome.status} "
              f"({outcome.seconds:.0f} s){' — ' + outcome.detail if outcome.detail else ''}",
              flush=True)
    assert pristine.read_text(encoding="utf-8") == text, "the pristine tree was modified"
    return outcomes, len(mutants), base_seconds


def summary(
    target: Target, outcomes: list[Outcome], generated: int, text: str
) -> dict[str, object]:
    count = {s: sum(o.status == s for o in outcomes)
             for s in ("killed", "killed at import", "timeout", "survived", "invalid",
                       "equivalent")}
    detected = count["killed"] + count["killed at import"] + count["timeout"]
    denominator = len(outcomes) - count["equivalent"] - count["invalid"]
    rate = detected / denominator if denominator else 0.0
    seconds = [o.seconds for o in outcomes if o.status not in ("invalid", "equivalent")]
    print(f"\n{target.path}: {generated} mutants generated, {len(outcomes)} run")
    for status, n in count.items():
        print(f"  {status}: {n}")
    print(f"kill rate: {detected} / {denominator} = {100 * rate:.1f}% of non-equivalent, "
          f"valid mutants")
    if seconds:
        print(f"time: {sum(seconds):.0f} s for {len(seconds)} runs, "
              f"{sum(seconds) / len(seconds):.1f} s per mutant")
    survivors = [o for o in outcomes if o.status == "survived"]
    if survivors:
        print(f"survivors ({len(survivors)}):")
        for o in survivors:
            print(f"  {o.mutant.id} line {o.mutant.line} [{o.mutant.operator}] "
                  f"{o.mutant.diff_line(text)}")
    return {
        "file": target.path, "generated": generated, "run": len(outcomes), **count,
        "kill_rate": rate, "seconds": sum(seconds),
        "outcomes": [
            {"id": o.mutant.id, "line": o.mutant.line, "operator": o.mutant.operator,
             "status": o.status, "seconds": round(o.seconds, 1), "detail": o.detail,
             "mutated": o.mutant.diff_line(text)}
            for o in outcomes
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/vllm_mutation.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", choices=sorted(TARGETS), action="append",
                        help="the target to mutate (default: all)")
    parser.add_argument("--limit", type=int, default=None,
                        help="a deterministic, evenly spaced sample of N mutants per file")
    parser.add_argument("--jobs", type=int, default=1,
                        help="mutants run at once (one hard-linked copy each); default 1")
    parser.add_argument("--vllm-src", type=Path, default=DEFAULT_TREE)
    parser.add_argument("--timeout-factor", type=float, default=5.0,
                        help="a mutant's run past this many times the unmutated run's (at least "
                             "120 s) is stopped: 'timeout', counted as detected")
    parser.add_argument("--ids", nargs="+", default=[], metavar="ID",
                        help="run only these mutants (e.g. survivors again), not a sample")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--json", type=Path, help="write the outcomes here")
    args = parser.parse_args(argv)

    tree: Path = args.vllm_src
    if not (tree / "vllm" / "__init__.py").is_file():
        print(f"no vLLM tree at {tree} (python adapters/vllm/fetch.py 0.33.0)", file=sys.stderr)
        return 2
    targets = [TARGETS[k] for k in (args.file or sorted(TARGETS))]
    if args.ids:
        prefixes = {i.split("-")[0] for i in args.ids}
        targets = [t for t in targets if t.prefix in prefixes]
    if args.list:
        for target in targets:
            text = (tree / target.path).read_text(encoding="utf-8")
            for m in find_mutants(text, target):
                mark = " (equivalent)" if m.id in EQUIVALENT else ""
                print(f"{m.id} line {m.line} [{m.operator}]{mark} {m.diff_line(text)}")
        return 0
    if args.jobs != 1:
        print("--jobs: only 1 is implemented (the vLLM runs are CPU-bound; run one at a time "
              "on a shared machine)", file=sys.stderr)

    started = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="vllm-mutation-") as scratch:
        for target in targets:
            outcomes, generated, _ = run_file(target, tree, Path(scratch), args.limit,
                                              args.timeout_factor, args.ids)
            text = (tree / target.path).read_text(encoding="utf-8")
            results.append(summary(target, outcomes, generated, text))
    print(f"\ntotal: {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

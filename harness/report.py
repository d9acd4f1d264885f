"""Render a :class:`~harness.runner.Report` as text.

Layout: a header naming the adapter and the implementation behind every component; one
table row per (clause, property); for every FAIL, ERROR or VACUOUS a section with the
clause's statement and production symptom (from SPEC.md), the message, the minimal
counterexample and how to replay it (a property whose every clause is "not provided"
judged nothing: no section); a line per property with "not provided" rows, saying why,
clause by clause; then one summary line. Everything but the summary
line is a function of the adapter and the profile, so two runs can be diffed.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Sequence

import hypothesis
import numpy

from harness.replay import adapter_argument, blob_argument, invocation
from harness.runner import Failure, PropertyResult, Report, Verdict, reasons_in_words
from spec.clauses import load_clauses, mmspec_version, spec_digest

_HEADERS = ("clause", "property", "examples", "verdict", "implementation")
_NEEDS_SECTION = (Verdict.FAIL, Verdict.ERROR, Verdict.VACUOUS)


def render(report: Report, replay_options: str = "", states: Collection[str] = ()) -> str:
    """The whole report, ending with a newline. ``replay_options`` are appended to each
    replay command (e.g. `` --vllm-src PATH``: what else the run needed). ``states``: the
    properties whose count is of distinct states, not examples (``verify --exhaustive``:
    the machines searched exhaustively); the count column says so."""
    lines = _header(report)
    lines += ["", *_table(report, frozenset(states))]
    for result in report.results.values():
        # a property whose every clause is "not provided" judged nothing: its rows say so
        judged = bool(result.judged or result.failures)
        if (result.verdict in _NEEDS_SECTION and judged) or result.set_aside:
            lines += ["", *_section(report, result, replay_options)]
    lacking = _not_provided(report)
    if lacking:
        lines += ["", "== not provided ==", *lacking]
    partial = [
        result.scope_line()
        for result in report.results.values()
        if result.scope and result.verdict is not Verdict.NOT_PROVIDED
    ]
    if partial:
        lines += ["", "== judged on what the adapter serves ==", *partial]
    missing = [row for row in report.rows if row.verdict is Verdict.MISSING]
    if missing:
        lines += ["", "== missing property =="]
        for row in missing:
            if row.property == "—":
                lines.append(f"{row.clause}: SPEC.md names no property that checks it")
            else:
                lines.append(
                    f"{row.clause}: SPEC.md names `{row.property}`, which no property "
                    "module registers"
                )
    lines += ["", summary_line(report)]
    return "\n".join(lines) + "\n"


def summary_line(report: Report) -> str:
    counts = ", ".join(f"{n} {verdict.value}" for verdict, n in report.counts().items())
    outcome = "OK" if report.ok else "FAILED"
    rows = f"{len(report.rows)} clause row{'' if len(report.rows) == 1 else 's'}"
    return f"{outcome}: {rows} ({counts}) in {report.seconds:.1f} s"


def identity_line() -> str:
    """What judged: the project's version, the clause set's digest, and the versions of
    the libraries that generate and shrink the test cases (two reports compare only when
    these agree)."""
    return (
        f"mmspec {mmspec_version()}; SPEC.md {len(load_clauses())} clauses, digest "
        f"{spec_digest()}; hypothesis {hypothesis.__version__}, numpy {numpy.__version__}"
    )


def _header(report: Report) -> list[str]:
    lines = [
        identity_line(),
        f"adapter: {report.adapter_name}  (ref {report.adapter_ref}, identity {report.identity})",
        f"profile: {report.profile}",
        "components:",
    ]
    width = max((len(c) for c in report.provenance), default=0)
    lines += [f"  {c.ljust(width)}  {owner}" for c, owner in report.provenance.items()]
    return lines


def _table(report: Report, states: frozenset[str] = frozenset()) -> list[str]:
    """The rows. The count column is ``examples`` (Hypothesis' test cases); where every
    row was counted in distinct states (an exhaustive search) it is ``states``, and where
    the two mix, each state count says ``states``."""
    all_states = bool(report.rows) and all(row.property in states for row in report.rows)
    headers = (*_HEADERS[:2], "states", *_HEADERS[3:]) if all_states else _HEADERS

    def count(examples: int | None, in_states: bool) -> str:
        if not examples:
            return "—"
        return f"{examples} states" if in_states and not all_states else str(examples)

    cells = [
        (
            row.clause,
            row.property,
            count(row.examples, row.property in states),
            row.verdict.value,
            row.implementations,
        )
        for row in report.rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        out = [
            v.rjust(w) if i == 2 else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(c) for c in cells)]


def _not_provided(report: Report) -> list[str]:
    """One line per property with "not provided" rows: why, clause by clause."""
    lines = []
    for name, result in report.results.items():
        clauses = [
            row.clause
            for row in report.rows
            if row.property == name and row.verdict is Verdict.NOT_PROVIDED
        ]
        if not clauses:
            continue
        why = result.why_not_provided()
        if result.verdict is Verdict.NOT_PROVIDED:
            lines.append(f"{name} ({', '.join(clauses)}): {result.detail}")
        else:
            reasons = reasons_in_words((c, why.get(c, result.detail)) for c in clauses)
            lines.append(f"{name}: {reasons}")
    return lines


def _section(report: Report, result: PropertyResult, replay_options: str = "") -> list[str]:
    judged = result.judged or result.clauses
    lines = [f"== {result.verdict.value} {result.name} ({', '.join(judged)}) =="]
    if len(judged) < len(result.clauses):
        reasons = result.why_not_provided()
        lacking = ((c, reasons.get(c, "")) for c in result.clauses if c not in judged)
        lines.append(f"not provided: {reasons_in_words(lacking)}")
    if result.verdict is Verdict.VACUOUS:
        lines += _clause_titles(report, judged)
        lines.append(f"why: {result.run_detail()}")
        if result.transitions:
            counts = ", ".join(f"{name} {count}" for name, count in result.transitions)
            lines.append(f"transitions reached: {counts}")
    for number, failure in enumerate(result.failures, 1):
        if len(result.failures) > 1:
            lines.append(f"-- failure {number} of {len(result.failures)} --")
        lines += _failure(report, result, failure)
    aside = list(dict.fromkeys(
        [*result.set_aside, *(f.clause for f in result.failures if f.clause is not None)]
    ))
    if result.passed:
        lines.append(
            f"judged on the runs in which {', '.join(aside)} held (the runs breaking them set "
            f"aside): {', '.join(result.passed)} pass"
        )
    blocked = [c for c in result.clauses if result.verdict_for(c) is Verdict.BLOCKED]
    if blocked:
        why = result.blocked_because or "blocked by the failure above"
        lines.append(f"not checked to the end: {', '.join(blocked)} ({why})")
    lines.append("replay:")
    for set_aside in dict.fromkeys(f.set_aside for f in result.failures) or [result.set_aside]:
        lines.append(f"  {replay_command(report, result.name, set_aside, replay_options)}")
    examples = [
        example_replay_command(report, result.name, f, replay_options)
        for f in result.failures
    ]
    if any(examples):
        lines.append(EXAMPLE_REPLAY_HEADING)
        lines += [f"  {command}" for command in dict.fromkeys(examples) if command]
    return lines


#: The line before a failure's one-example replay commands.
EXAMPLE_REPLAY_HEADING = "replay the shrunk example alone (about a second):"


def replay_command(
    report: Report, name: str, set_aside: Sequence[str] = (), replay_options: str = ""
) -> str:
    """The command that replays property ``name`` of ``report``, pasted into any shell
    in any folder (:mod:`harness.replay`)."""
    with_aside = f" --set-aside {' '.join(set_aside)}" if set_aside else ""
    return (
        f"{invocation()} verify --adapter {shlex.quote(adapter_argument(report.adapter_ref))} "
        f"--profile {report.profile} --only {name}{with_aside}{replay_options}"
    )


def example_replay_command(
    report: Report, name: str, failure: Failure, replay_options: str = ""
) -> str | None:
    """:func:`replay_command` of the one test case ``failure`` shrank to (``--replay``),
    or None when Hypothesis printed no blob for it."""
    blob = blob_argument(failure.reproduce)
    if blob is None:
        return None
    command = replay_command(report, name, failure.set_aside, replay_options)
    return f"{command} --replay {blob}"


def _failure(report: Report, result: PropertyResult, failure: Failure) -> list[str]:
    lines: list[str] = []
    if failure.clause is not None:
        clause = report.clauses.get(failure.clause)
        if clause is not None:
            lines.append(f"{clause.id} — {clause.title}")
            lines.append(f"statement: {clause.statement}")
            lines.append(f"symptom: {clause.symptom}")
        else:
            lines.append(f"{failure.clause} (not in SPEC.md)")
    else:
        lines += _clause_titles(report, result.clauses)
    if failure.set_aside:
        lines.append(
            f"found on a run in which {', '.join(failure.set_aside)} held (the runs breaking "
            "them set aside): this clause's own counterexample"
        )
    lines.append(f"message: {failure.message}")
    if failure.counterexample:
        lines.append("counterexample:")
        for note in failure.counterexample:
            lines += [f"  {part}" for part in note.strip("\n").splitlines()]
    if failure.reproduce:
        lines.append(f"reproduce blob: {failure.reproduce}")
    return lines


def _clause_titles(report: Report, clause_ids: Sequence[str]) -> list[str]:
    lines = []
    for clause_id in clause_ids:
        clause = report.clauses.get(clause_id)
        lines.append(f"{clause_id} — {clause.title}" if clause else f"{clause_id} (not in SPEC.md)")
    return lines

"""Grade an adapter against a rubric: the runner's verdicts, mapped onto rubric items.

:func:`grade` runs (through :func:`harness.runner.verify`) exactly the properties the
rubric's attempted items need, in the ``grading`` profile unless told otherwise, seeded
with the instructor's seed when one is given. Each item then gets one status:

- ``passed`` — every clause of the item holds: its points;
- ``failed`` — a clause is violated (FAIL), or the implementation crashed (ERROR);
- ``blocked`` — no run of a state machine could check this item's clause without
  breaking a clause of *another* item first (the machine is re-run with failing clauses
  set aside, so this is rare): 0 points, and the reason named;
- ``not provided`` — the adapter lacks a component the item is about, or the component
  raises ``NotImplementedError`` (the student template's unfilled stubs);
- ``not attempted`` — the adapter declares, in ``Adapter.not_attempted``, a capability
  the item needs; its properties are not run;
- ``needs the reference`` — the student kit only (a copy without the reference): the
  item is one of the course's hidden tests (``autograder_only``, or a property of it is
  not in the kit: it compares with the reference's models and oracles), or a property of
  it uses a component the adapter lacks, for which the reference would stand in; it is
  not judged here (0 points here, graded on the autograder).

Then, for each failure, the minimal failing test case is replayed once more with the
components recorded (:mod:`harness.grading.recording`) and turned into a standalone
reproducer script (:mod:`harness.grading.reproducer`).

Over 400 lines (828) because one grade from verdicts to rubric items, reproducers and
the report, in the order a grade is made.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from hypothesis.reporting import with_reporter

from harness.catalog import (
    clauses_needing_the_reference,
    needing_the_reference,
    registered_properties,
)
from harness.grading.counterexample import narration, numbered, parse_blob
from harness.grading.recording import recording_parts
from harness.grading.report_text import quoted, safe_report
from harness.grading.reproducer import (
    Reproducer,
    ScriptContext,
    Unrenderable,
    Verification,
    make_reproducer,
    verify_script,
)
from harness.grading.rubric import DEFAULT_RUBRIC, Rubric, RubricItem
from harness.isolation import IsolatedSession, Limits
from harness.isolation.proxy import ImplementationDied
from harness.loader import (
    NEEDS_REFERENCE,
    REFERENCE_REF,
    AdapterLoadError,
    LoadedAdapter,
    build_parts,
    load_adapter,
    make_siblings_importable,
)
from harness.names import COMMAND, HAS_REFERENCE
from harness.profiles import PROFILES
from harness.runner import (
    ClauseRow,
    Failure,
    PropertyResult,
    Report,
    Verdict,
    reasons_in_words,
    run_property,
    verify,
)
from properties.framework import EXPLICIT_EXAMPLES, each_example
from spec.clauses import load_clauses

if TYPE_CHECKING:  # the student kit holds no exhaustive search: it needs the models
    from exhaustive.check import Exhaustive

#: The profile grading runs in unless told otherwise (derandomized, fixed counts).
GRADING_PROFILE = "grading"

#: Stands for the seed in commands shown to students when the instructor hides it.
SECRET_SEED = "SECRET"

#: The report's isolation line when the implementation ran in the grader's process.
IN_PROCESS = "none (in-process)"


class ItemStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    BLOCKED = "blocked"
    NOT_PROVIDED = "not provided"
    NOT_ATTEMPTED = "not attempted"
    NEEDS_REFERENCE = "needs the reference"


@dataclass(frozen=True)
class FailureDetail:
    """One failure shown under an item: what broke, the minimal counterexample, and
    how to replay it."""

    property_name: str
    clause: str | None  # None: the implementation crashed (no clause verdict)
    clause_title: str
    statement: str
    symptom: str
    message: str
    #: The counterexample as numbered steps (the property's narration).
    steps: tuple[str, ...]
    replay_command: str
    reproducer: Reproducer | None
    #: Why there is no reproducer, when there is none.
    reproducer_note: str = ""

    @property
    def kind(self) -> str:
        return "violation" if self.clause is not None else "error"


@dataclass(frozen=True)
class ItemResult:
    item: RubricItem
    status: ItemStatus
    score: float
    #: One line: why the item has this status.
    summary: str
    properties: tuple[str, ...] = ()
    examples: int = 0
    failures: tuple[FailureDetail, ...] = ()
    seconds: float = 0.0


@dataclass(frozen=True)
class GradeReport:
    adapter_ref: str
    adapter_name: str
    profile: str
    seed: int | None
    seed_hidden: bool
    rubric: Rubric
    #: component -> the implementation that stood behind it
    provenance: Mapping[str, str]
    items: tuple[ItemResult, ...]
    warnings: tuple[str, ...] = ()
    #: Set when the adapter could not be loaded (then every item is "not provided").
    load_error: str | None = None
    seconds: float = 0.0
    #: How the implementation ran: in this process, or isolated (with its limits).
    isolation: str = IN_PROCESS
    #: What the isolated implementation wrote to stdout/stderr (never parsed; shown
    #: apart from the report, see docs/grading.md "Isolation").
    submission_output: str = ""

    @property
    def score(self) -> float:
        return sum(result.score for result in self.items)

    @property
    def max_score(self) -> float:
        return sum(result.item.points for result in self.items)

    @property
    def shown_seed(self) -> str:
        if self.seed is None:
            return "none (the profile's derandomized default)"
        return "hidden (set by the instructor)" if self.seed_hidden else str(self.seed)

    def counts(self) -> dict[ItemStatus, int]:
        counts = {status: 0 for status in ItemStatus}
        for result in self.items:
            counts[result.status] += 1
        return {status: n for status, n in counts.items() if n}


#: ``progress(message)``: one line of progress for the person waiting.
Progress = Callable[[str], None]


def grade(
    adapter_ref: str,
    rubric: Rubric,
    profile: str = GRADING_PROFILE,
    seed: int | None = None,
    *,
    only: Sequence[str] | None = None,
    hide_seed: bool = False,
    reproducers: bool = True,
    progress: Progress | None = None,
    verify_reproducers: bool = True,
    isolation: Limits | None = None,
    exhaustive: Exhaustive | None = None,
    jobs: int = 1,
) -> GradeReport:
    """Grade the adapter ``adapter_ref`` against ``rubric``.

    ``only``: grade only the items that contain these clause ids, property names or item
    names. ``hide_seed``: commands shown in the report say ``--seed SECRET`` instead of
    the seed. Raises ``ValueError`` for an unknown profile or ``only`` name; a malformed
    adapter gives a report of zero points that says what is wrong. ``isolation``: run
    the adapter in a child process under these limits (:mod:`harness.isolation`);
    the adapter is then never imported by the grader. ``exhaustive``: the deterministic
    grading mode, the state machines' clauses (ECM, SYS) judged by exhaustive search
    within its scopes instead of Hypothesis (docs/exhaustive.md). ``jobs``: run the
    properties in that many forked processes, each isolated one with a child of its own
    (the report is the same for any number: :func:`harness.runner.verify`).
    """
    started = time.perf_counter()
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    say = progress or (lambda _message: None)
    items = _selected(rubric, only)
    session: IsolatedSession | None = None
    try:
        if isolation is None:
            make_siblings_importable(adapter_ref)
            loaded = load_adapter(adapter_ref)
        else:
            session = IsolatedSession(adapter_ref, isolation)
            loaded = session.loaded
    except AdapterLoadError as e:
        unloadable = _unloadable(
            adapter_ref, rubric, items, profile, seed, hide_seed, str(e), started
        )
        return safe_report(replace(unloadable, isolation=_isolation_text(isolation)))
    try:
        report = _graded(
            adapter_ref, rubric, items, loaded, profile, seed, hide_seed, session,
            reproducers, verify_reproducers, say, started, exhaustive, jobs,
        )
    finally:
        if session is not None:
            output = session.submission_output()
            session.close()
    if session is None:
        return safe_report(report)
    return safe_report(
        replace(report, isolation=_isolation_text(isolation), submission_output=output)
    )


def _isolation_text(isolation: Limits | None) -> str:
    return IN_PROCESS if isolation is None else isolation.describe()


def _graded(
    adapter_ref: str,
    rubric: Rubric,
    items: list[RubricItem],
    loaded: LoadedAdapter,
    profile: str,
    seed: int | None,
    hide_seed: bool,
    session: IsolatedSession | None,
    reproducers: bool,
    verify_reproducers: bool,
    say: Progress,
    started: float,
    exhaustive: Exhaustive | None,
    jobs: int = 1,
) -> GradeReport:
    declared = frozenset(loaded.adapter.not_attempted)
    warnings = [
        f"ADAPTER.not_attempted names {name!r}, which this rubric does not declare; ignored"
        for name in sorted(declared - rubric.capabilities.keys())
    ]
    attempted = [item for item in items if not item.capabilities & declared]
    hidden = [item for item in attempted if _hidden_here(item)]
    clauses = list(
        dict.fromkeys(c for item in attempted if item not in hidden for c in item.clauses)
    )
    elsewhere = f" ({len(hidden)} graded on the autograder only)" if hidden else ""
    say(f"grading {adapter_ref} ({loaded.name}): {len(attempted)} of {len(items)} items"
        f"{elsewhere}, {len(clauses)} clauses, profile {profile}, "
        f"seed {'set' if seed is not None else 'none'}")
    report = (
        verify(
            adapter_ref,
            profile,
            clauses,
            seed=seed,
            progress=_runner_progress(say),
            session=session,
            transform=exhaustive.transform if exhaustive is not None else None,
            jobs=jobs,
            heartbeat=lambda line: say(f"  ... {line}"),
        )
        if clauses
        else None
    )
    context = _Context(
        adapter_ref,
        loaded,
        rubric,
        profile,
        seed,
        hide_seed,
        report,
        session=session,
        exhaustive=exhaustive.scopes.name if exhaustive is not None else None,
    )
    details = _failure_details(context, reproducers, verify_reproducers, say)
    results = []
    for item in items:
        if item not in attempted:
            results.append(_not_attempted(item, declared, rubric))
        elif item in hidden:
            results.append(_graded_on_the_autograder(item))
        else:
            assert report is not None
            results.append(_item_result(item, report, rubric, details))
    if report is not None:
        warnings += _vacuous_warnings(report)
    return GradeReport(
        adapter_ref=adapter_ref,
        adapter_name=loaded.name,
        profile=profile,
        seed=seed,
        seed_hidden=hide_seed and seed is not None,
        rubric=rubric,
        provenance=dict(report.provenance) if report is not None else {},
        items=tuple(results),
        warnings=tuple(warnings),
        seconds=time.perf_counter() - started,
    )


def _selected(rubric: Rubric, only: Sequence[str] | None) -> list[RubricItem]:
    if not only:
        return list(rubric.items)
    registry = registered_properties()
    absent = needing_the_reference()  # the student kit's hidden properties
    wanted: set[str] = set()
    unknown = []
    for name in only:
        if name in registry:
            wanted.update(registry[name].clauses)
        elif name in absent:
            wanted.update(c.id for c in load_clauses().values() if name in c.checked_by)
        elif any(name in item.clauses or name == item.name for item in rubric.items):
            wanted.add(name)
        else:
            unknown.append(name)
    if unknown:
        raise ValueError(
            f"--only {', '.join(unknown)}: not a property, clause or item of this rubric"
        )
    return [
        item for item in rubric.items if item.name in wanted or wanted & set(item.clauses)
    ]


def _runner_progress(say: Progress) -> Callable[[int, int, str, PropertyResult | None], None]:
    def progress(index: int, total: int, name: str, result: PropertyResult | None) -> None:
        if result is None:
            say(f"[{index}/{total}] {name} ...")
        else:
            say(f"[{index}/{total}] {name}: {result.verdict_text()} ({result.seconds:.1f} s)")

    return progress


# --- items ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    adapter_ref: str
    loaded: LoadedAdapter
    rubric: Rubric
    profile: str
    seed: int | None
    hide_seed: bool
    report: Report | None
    session: IsolatedSession | None = None
    #: the exhaustive scope's name in the deterministic grading mode
    exhaustive: str | None = None

    def command(self, property_name: str) -> str:
        parts = [f"{COMMAND} grade", self.adapter_ref]
        if self.profile != GRADING_PROFILE:
            parts.append(f"--profile {self.profile}")
        if self.seed is not None:
            parts.append(f"--seed {SECRET_SEED if self.hide_seed else self.seed}")
        if Path(self.rubric.source).resolve() != DEFAULT_RUBRIC:
            parts.append(f"--rubric {self.rubric.source}")
        if self.exhaustive is not None:
            parts.append(f"--exhaustive {self.exhaustive}")
        parts.append(f"--only {property_name}")
        return " ".join(parts)


def _not_attempted(item: RubricItem, declared: frozenset[str], rubric: Rubric) -> ItemResult:
    names = sorted(item.capabilities & declared)
    meaning = "; ".join(f"{n}: {rubric.capabilities.get(n, '')}" for n in names)
    return ItemResult(
        item,
        ItemStatus.NOT_ATTEMPTED,
        0.0,
        f"the adapter declares it does not attempt {', '.join(names)} ({meaning})",
    )


def _hidden_here(item: RubricItem) -> bool:
    """Whether this copy cannot grade the item: the student kit, for an item marked
    ``autograder_only`` or one a property of which the kit does not hold."""
    if HAS_REFERENCE:
        return False
    return item.autograder_only or bool(set(item.clauses) & clauses_needing_the_reference())


def _graded_on_the_autograder(item: RubricItem) -> ItemResult:
    return ItemResult(
        item,
        ItemStatus.NEEDS_REFERENCE,
        0.0,
        f"{', '.join(item.clauses)}: a hidden item, which {NEEDS_REFERENCE}: graded on the "
        "autograder",
    )


def _is_unimplemented(failure: Failure) -> bool:
    """The student template's stubs raise NotImplementedError: "not provided" yet."""
    return failure.verdict is Verdict.ERROR and "raised NotImplementedError" in failure.message


def _unimplemented(result: PropertyResult) -> bool:
    return (
        result.verdict is Verdict.ERROR
        and bool(result.failures)
        and all(_is_unimplemented(f) for f in result.failures)
    )


def _item_result(
    item: RubricItem,
    report: Report,
    rubric: Rubric,
    details: Mapping[tuple[str, int], FailureDetail],
) -> ItemResult:
    rows = [row for row in report.rows if row.clause in item.clauses]
    names = tuple(dict.fromkeys(r.property for r in rows if r.property in report.results))
    results = [report.results[n] for n in names]
    examples = sum(r.examples for r in results)
    seconds = sum(r.seconds for r in results)
    failed: list[str] = []
    blocked: list[str] = []
    missing: list[str] = []
    stand_ins: list[str] = []
    for row in rows:
        result = report.results.get(row.property)
        if row.verdict is Verdict.MISSING:
            failed.append(f"{row.clause}: no property checks it (a defect of the suite)")
        elif row.verdict is Verdict.FAIL:
            failed.append(row.clause)
        elif row.verdict is Verdict.ERROR and result is not None and not _unimplemented(result):
            failed.append(row.clause)
        elif row.verdict is Verdict.BLOCKED:
            blocked.append(row.clause)
        elif row.verdict is Verdict.NEEDS_REFERENCE:
            stand_ins.append(row.clause)
        elif row.verdict is Verdict.NOT_PROVIDED or (
            row.verdict is Verdict.ERROR and result is not None
        ):
            missing.append(row.clause)
    # A clause checked by several properties is missing only if none of them judged it
    # (EngineResetMachine's SYS-1..10 are not provided without resets; EngineMachine's are)
    judged = {row.clause for row in rows if row.verdict is Verdict.PASS}
    missing = [clause for clause in missing if clause not in judged]
    stand_ins = [clause for clause in stand_ins if clause not in judged]
    failures = tuple(
        detail
        for name in names
        for (prop, _index), detail in sorted(details.items())
        if prop == name
        and (detail.clause in item.clauses or detail.clause is None)
    )

    def made(status: ItemStatus, summary: str) -> ItemResult:
        score = item.points if status is ItemStatus.PASSED else 0.0
        return ItemResult(item, status, score, summary, names, examples, failures, seconds)

    if failed:
        return made(ItemStatus.FAILED, _failed_summary(failures, failed))
    if blocked:
        return made(ItemStatus.BLOCKED, _blocked_summary(blocked, report, rubric))
    if missing:
        return made(ItemStatus.NOT_PROVIDED, _missing_summary(rows, report, missing))
    if stand_ins:
        return made(ItemStatus.NEEDS_REFERENCE, _stand_in_summary(stand_ins, rows, report))
    clauses = len(item.clauses)
    return made(
        ItemStatus.PASSED,
        f"{clauses} clause{'s' if clauses != 1 else ''} hold "
        f"({len(names)} propert{'ies' if len(names) != 1 else 'y'}, {examples} examples)"
        + _credited_through_stand_ins(names, report)
        + "".join(
            f"; {report.results[name].scope_line()}"
            for name in names
            if report.results[name].scope
        ),
    )


def _credited_through_stand_ins(names: Sequence[str], report: Report) -> str:
    """``"; the reference stood in for X: the points are for your Y"`` when the item's
    properties ran on components the adapter lacks (an encoder-cache-only build is
    graded on the engine loop through the reference's engine, with its cache manager
    inside), else ``""``."""
    registry = registered_properties()
    involved = dict.fromkeys(
        component
        for name in names
        if name in registry
        for component in (*registry[name].subject, *registry[name].uses)
    )
    ours = [c for c in involved if report.provenance.get(c) == report.adapter_name]
    stood_in = [c for c in involved if c in report.provenance and c not in ours]
    if not stood_in or not ours:
        return ""
    owners = ", ".join(dict.fromkeys(report.provenance[c] for c in stood_in))
    if owners == "reference":
        owners = "the reference"
    return (
        f"; {owners} stood in for {', '.join(stood_in)}, which the adapter does not "
        f"provide: the points are for its {', '.join(ours)}"
    )


def _failed_summary(failures: Sequence[FailureDetail], failed: Sequence[str]) -> str:
    violations = [d for d in failures if d.clause is not None]
    if violations:
        first = violations[0]
        return f"{first.clause} — {first.clause_title}: {first.message}"
    if failures:
        return f"error in {failures[0].property_name}: {failures[0].message}"
    return "violated: " + ", ".join(failed)


def _blocked_summary(
    blocked: Sequence[str], report: Report, rubric: Rubric
) -> str:
    causes = []
    for clause in blocked:
        for row in report.rows:
            if row.clause != clause:
                continue
            result = report.results.get(row.property)
            if result is None:
                continue
            for failure in result.failures:
                where = _item_of(failure.clause, rubric)
                cause = failure.clause or "an error"
                text = f"{row.property} stopped at {cause}" + (f" ({where})" if where else "")
                if text not in causes:
                    causes.append(text)
    reasons = dict.fromkeys(
        result.blocked_because
        for row in report.rows
        if row.clause in blocked
        and (result := report.results.get(row.property)) is not None
        and result.blocked_because
    )
    why = f" ({'; '.join(reasons)})" if reasons else ""
    return (
        f"not checked to the end ({', '.join(blocked)}): " + "; ".join(causes)
        + why + " — fix that first"
    )


def _item_of(clause: str | None, rubric: Rubric) -> str | None:
    for item in rubric.items:
        if clause in item.clauses:
            return f'item {item.number}, "{item.name}"'
    return None


def _missing_summary(
    rows: Sequence[ClauseRow], report: Report, missing: Sequence[str]
) -> str:
    """Why the ``missing`` clauses were not judged, each reason once: a component the
    adapter lacks, a capability a clause needs (with the clauses it is given for), a
    stub not implemented yet."""
    reasons: list[str] = []
    lacking: list[tuple[str, str]] = []
    for row in rows:
        result = report.results.get(row.property)
        if result is None or row.clause not in missing:
            continue
        why = result.why_not_provided().get(row.clause)
        if result.verdict is Verdict.NOT_PROVIDED:
            reason = result.detail
        elif why is not None:
            lacking.append((row.clause, why))
            continue
        elif _unimplemented(result):
            reason = "not implemented yet: " + _strip_location(result.failures[0].message)
        else:
            continue
        if reason not in reasons:
            reasons.append(reason)
    return "; ".join([*_merged(reasons), *([reasons_in_words(lacking)] if lacking else [])])


def _stand_in_summary(
    stand_ins: Sequence[str], rows: Sequence[ClauseRow], report: Report
) -> str:
    """Why the student kit cannot judge these clauses (its properties' details: the
    components the reference would have stood in for)."""
    reasons = dict.fromkeys(
        result.detail
        for row in rows
        if row.clause in stand_ins
        and (result := report.results.get(row.property)) is not None
        and result.verdict is Verdict.NEEDS_REFERENCE
    )
    return f"{', '.join(stand_ins)}: " + "; ".join(reasons)


#: Hypothesis' first note on a failure found in an explicit ``@example``.
_EXPLICIT = re.compile(r"^(Falsifying|Failing) explicit example")
_ABSENT = re.compile(r"^(?P<who>.+) does not provide (?P<what>.+)$")


def _merged(reasons: Sequence[str]) -> list[str]:
    """"X does not provide a; X does not provide b" reads "X does not provide a, b"."""
    absent: dict[str, list[str]] = {}
    others: list[str] = []
    for reason in reasons:
        match = _ABSENT.match(reason)
        if match is None:
            others.append(reason)
            continue
        names = absent.setdefault(match["who"], [])
        names += [n for n in match["what"].split(", ") if n not in names]
    return [f"{who} does not provide {', '.join(what)}" for who, what in absent.items()] + others


def _vacuous_warnings(report: Report) -> list[str]:
    """One warning per property with a VACUOUS row (one whose every clause is "not
    provided" judged nothing, and says so: no warning)."""
    return [
        f"{name} was VACUOUS under this profile and seed on {', '.join(vacuous)} "
        f"({result.run_detail()}); its items were graded as passed: the coverage "
        "shortfall is the suite's, not the implementation's"
        for name, result in report.results.items()
        if (vacuous := [c for c in result.clauses if result.verdict_for(c) is Verdict.VACUOUS])
    ]


# --- failures and reproducers --------------------------------------------------------------

_LOCATION = re.compile(r" \(at (?:properties|hypothesis)[^)]*\)")


def _strip_location(message: str) -> str:
    """Drop "(at properties/...)" locations: the grader's own frames are not the
    student's business (their own files' locations are kept)."""
    return _LOCATION.sub("", message)


def _failure_details(
    context: _Context, reproducers: bool, verify_them: bool, say: Progress
) -> dict[tuple[str, int], FailureDetail]:
    report = context.report
    if report is None:
        return {}
    details: dict[tuple[str, int], FailureDetail] = {}
    for name, result in report.results.items():
        if result.verdict not in (Verdict.FAIL, Verdict.ERROR) or _unimplemented(result):
            continue
        for index, failure in enumerate(result.failures):
            if _is_unimplemented(failure):
                continue
            clause = report.clauses.get(failure.clause) if failure.clause else None
            detail = FailureDetail(
                property_name=name,
                clause=failure.clause,
                clause_title=clause.title if clause else "",
                statement=clause.statement if clause else "",
                symptom=clause.symptom if clause else "",
                message=_strip_location(failure.message),
                steps=tuple(numbered(narration(failure.counterexample))),
                replay_command=context.command(name),
                reproducer=None,
            )
            if _died(failure):
                detail = replace(
                    detail,
                    reproducer_note="not built: the isolated implementation died or hit a "
                    "limit (a script would only do the same)",
                )
            elif reproducers:
                say(f"reproducer for {name} ({failure.clause or 'error'}) ...")
                detail = _with_reproducer(context, detail, failure, index, verify_them)
            else:
                detail = replace(detail, reproducer_note="not built (--no-reproducers)")
            details[(name, index)] = detail
    return details


def _with_reproducer(
    context: _Context,
    detail: FailureDetail,
    failure: Failure,
    index: int,
    verify_them: bool,
) -> FailureDetail:
    def without(note: str) -> FailureDetail:
        return replace(detail, reproducer_note=note)

    if context.exhaustive is not None:
        return without("found by exhaustive search: the numbered path above is the reproducer")
    blob = parse_blob(failure.reproduce)
    explicit = blob is None and any(_EXPLICIT.match(note) for note in failure.counterexample)
    if explicit:
        blob = EXPLICIT_EXAMPLES
    if blob is None:
        return without("Hypothesis gave no replay blob for this failure")
    if not HAS_REFERENCE:
        return without(
            "not written: the student kit has no reference implementation to compute "
            "what the specification expects at each call (the autograder writes one); "
            "replay the property with the command above"
        )
    registry = registered_properties()
    spec = registry[detail.property_name]
    reference = load_adapter(REFERENCE_REF)
    if context.session is None:
        parts = build_parts(context.loaded.adapter, reference.adapter)
    else:
        parts = context.session.parts(reference.adapter)
        context.session.begin_property(detail.property_name)
    recorded, log = recording_parts(parts)
    with with_reporter(lambda value: log.notes.append(str(value))), each_example(log.restart):
        replayed = run_property(
            spec,
            recorded,
            context.profile,
            context.loaded.identity,
            replay=blob,
            set_aside=failure.set_aside if explicit else (),
        )
    if explicit:
        # Hypothesis keeps an explicit example's notes on its exception, not in order
        # between the calls: the narration goes first.
        same = next((f for f in replayed.failures if f.clause == failure.clause), None)
        log.notes[:] = list(same.counterexample) if same is not None else []
        for entry in log.entries:
            entry.notes_before = len(log.notes)
    again = [f for f in replayed.failures if f.clause == failure.clause]
    if not again:
        return without(
            "the minimal example did not fail the same way when replayed (does the "
            "implementation depend on something besides its inputs?)"
        )
    suffix = f"_{index + 1}" if index else ""
    filename = f"repro_{_safe(detail.property_name)}_{_safe(detail.clause or 'error')}{suffix}.py"
    item = _item_of(detail.clause, context.rubric) or "an error"
    script_context = ScriptContext(
        item=item,
        property_name=detail.property_name,
        clause_id=detail.clause,
        clause_title=detail.clause_title,
        statement=detail.statement,
        message=quoted(detail.message),  # the script's header quotes it: cut, safe
        adapter_ref=context.adapter_ref,
        command=detail.replay_command,
        isolated=context.session is not None,
    )
    checker: Callable[[str, str], Verification] | None = None
    if verify_them:
        # the script runs the graded code as grading does: same child, limits, prefix
        limits = context.session.limits if context.session is not None else None

        def checker(script: str, filename: str) -> Verification:
            return verify_script(script, filename, limits)

    try:
        reproducer = make_reproducer(
            log,
            reference.adapter,
            recorded.provenance,
            context.loaded.name,
            script_context,
            filename,
            verify=checker,
        )
    except Unrenderable as e:
        return without(f"a recorded value has no Python literal ({e})")
    verification = reproducer.verification
    if (
        detail.clause is None
        and verification is not None
        and verification.by_stand_in
        and detail.message.startswith(_IMPLEMENTATION_RAISED)
    ):
        # the reference, standing in for a component the adapter lacks, raised it (on
        # what the adapter's components gave it): not "your implementation raised"
        message = _STAND_IN_RAISED + detail.message[len(_IMPLEMENTATION_RAISED) :]
        return replace(detail, reproducer=reproducer, message=message)
    return replace(detail, reproducer=reproducer)


_IMPLEMENTATION_RAISED = "implementation raised "
_STAND_IN_RAISED = (
    "the reference, standing in for a component the adapter does not provide, raised "
    "(on what the adapter's components gave it) "
)


def _died(failure: Failure) -> bool:
    return failure.verdict is Verdict.ERROR and f"raised {ImplementationDied.__name__}" in (
        failure.message
    )


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").lower()


# --- an adapter that does not load ------------------------------------------------------


def _unloadable(
    adapter_ref: str,
    rubric: Rubric,
    items: Sequence[RubricItem],
    profile: str,
    seed: int | None,
    hide_seed: bool,
    error: str,
    started: float,
) -> GradeReport:
    results = tuple(
        ItemResult(item, ItemStatus.NOT_PROVIDED, 0.0, "the adapter could not be loaded")
        for item in items
    )
    return GradeReport(
        adapter_ref=adapter_ref,
        adapter_name="(not loaded)",
        profile=profile,
        seed=seed,
        seed_hidden=hide_seed and seed is not None,
        rubric=rubric,
        provenance={},
        items=results,
        load_error=error,
        seconds=time.perf_counter() - started,
    )

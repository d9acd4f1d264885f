"""Run registered properties against an adapter and turn outcomes into clause verdicts.

A property's run ends in one of:

- ``pass`` — Hypothesis found nothing, and (for a state machine) every transition
  SPEC.md declares for it was reached at least ``MIN_TRANSITION_HITS`` times;
- ``FAIL`` — a :class:`~properties.framework.ClauseViolation`: the clause it names does
  not hold; the counterexample is read from the exception's notes;
- ``ERROR`` — any other exception escaped (the implementation crashed, or Hypothesis
  gave up), also while the property was built or a capability probed, or on a per-clause
  rerun: no clause verdict can be drawn from it;
- ``VACUOUS`` — it passed without exercising what it claims to check;
- ``not provided`` — the adapter lacks a component the property is about, or an optional
  capability a clause needs (its probe says so, or the implementation raises
  ``NotImplementedError``); it did not run.

Per clause row, a multi-clause property (a state machine) that stopped at another
clause's violation reports the other clauses ``blocked``; a clause no registered
property checks is ``missing property``. Only ``pass`` and ``not provided`` let a run
succeed, so the suite can never silently skip a clause.

Over 400 lines (678) because running a property, its per-clause reruns and the
classification of what it raised share one run's state; split, they would pass it back
and forth.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import multiprocessing
import re
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from hypothesis import HealthCheck
from hypothesis import settings as Settings
from hypothesis.errors import FlakyFailure
from hypothesis.reporting import current_reporter, with_reporter
from hypothesis.reporting import default as default_reporter

from harness.catalog import registered_properties
from harness.heartbeat import beating, listening
from harness.loader import (
    NEEDS_REFERENCE,
    NOT_PROVIDED,
    REFERENCE_REF,
    LoadedAdapter,
    absent_provenance,
    build_parts,
    fallback_for,
    load_adapter,
)
from harness.names import COMMAND
from harness.profiles import DEFAULT_PROFILE, PROFILES, settings_for
from properties.framework import (
    ClauseViolation,
    Parts,
    PropertySpec,
    Runnable,
    keeps_own_cache,
    setting_aside,
)
from spec.clauses import (
    MIN_TRANSITION_HITS,
    Clause,
    load_clauses,
    load_transition_judges,
    load_transitions,
)

if TYPE_CHECKING:
    from harness.isolation.session import IsolatedSession

_CHECKOUT_ROOT = Path(__file__).resolve().parents[1]
_REPRODUCE = re.compile(r"@reproduce_failure\(.*?\)")
#: How a run that every test case of which was rejected ends (:func:`_classify`): with
#: failing clauses set aside, every run broke them first, and the rest is ``blocked``.
_UNSATISFIABLE = "Hypothesis stopped the run: Unsatisfiable"


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "FAIL"
    ERROR = "ERROR"
    VACUOUS = "VACUOUS"
    NOT_PROVIDED = "not provided"
    #: The student kit only: the property uses a component the adapter lacks, for which
    #: the reference would stand in; not judged here (graded on the autograder).
    NEEDS_REFERENCE = "needs the reference"
    BLOCKED = "blocked"
    MISSING = "missing property"


#: The verdicts a successful run may contain (``needs the reference``, the student kit's:
#: nothing was found wrong, and it is never counted as passed either).
ACCEPTED: frozenset[Verdict] = frozenset(
    {Verdict.PASS, Verdict.NOT_PROVIDED, Verdict.NEEDS_REFERENCE}
)

#: Report order of verdicts in the summary line.
VERDICT_ORDER: tuple[Verdict, ...] = tuple(Verdict)


@dataclass(frozen=True)
class Failure:
    """One failure a run ended with (Hypothesis may report several distinct ones)."""

    verdict: Verdict  # FAIL or ERROR
    clause: str | None  # the violated clause (FAIL only)
    message: str
    #: The exception's notes: Hypothesis' falsifying example and the ``note()`` lines.
    counterexample: tuple[str, ...]
    #: ``@reproduce_failure(...)`` when Hypothesis printed one.
    reproduce: str | None = None
    #: The clauses whose violations the run that found it set aside (per-clause
    #: verdicts: see :func:`run_property`); its replay needs ``--set-aside`` them.
    set_aside: tuple[str, ...] = ()


@dataclass(frozen=True)
class PropertyResult:
    """The outcome of one registered property."""

    name: str
    clauses: tuple[str, ...]
    verdict: Verdict
    examples: int = 0
    failures: tuple[Failure, ...] = ()
    #: For state machines: each declared transition and how often the model reached it.
    transitions: tuple[tuple[str, int], ...] = ()
    #: Why a run is VACUOUS or not provided.
    detail: str = ""
    seconds: float = 0.0
    #: Clauses judged ``pass`` on the runs that set the failing clauses (or those set
    #: aside on request) aside.
    passed: tuple[str, ...] = ()
    #: Why the clauses neither failed nor passed are ``blocked``.
    blocked_because: str = ""
    #: Clauses set aside on request (``--set-aside``): never judged, so ``blocked``.
    set_aside: tuple[str, ...] = ()
    #: Clauses whose optional capability the adapter lacks (``PropertySpec.capabilities``).
    not_provided: tuple[str, ...] = ()
    #: What the run left out of its clauses, as the adapter declared (``Runnable.scope``).
    scope: str = ""

    def verdict_for(self, clause: str) -> Verdict:
        """This property's verdict on one of its clauses."""
        if clause in self.not_provided:
            return Verdict.NOT_PROVIDED
        if clause in self.set_aside:
            return Verdict.BLOCKED
        if clause in self.passed:  # judged on the runs the failing clauses left
            return Verdict.PASS
        if self.verdict not in (Verdict.FAIL, Verdict.ERROR):
            return self.verdict
        if any(f.verdict is Verdict.FAIL and f.clause == clause for f in self.failures):
            return Verdict.FAIL
        if any(f.verdict is Verdict.ERROR for f in self.failures):
            return Verdict.ERROR
        return Verdict.BLOCKED

    def scope_line(self) -> str:
        """``"NAME (CLAUSES): SCOPE"``: what its run left out, in every report's words."""
        return f"{self.name} ({', '.join(self.judged or self.clauses)}): {self.scope}"

    @property
    def judged(self) -> tuple[str, ...]:
        """Its clauses that are not "not provided" (none: nothing of it was judged)."""
        return tuple(c for c in self.clauses if self.verdict_for(c) is not Verdict.NOT_PROVIDED)

    def verdict_text(self) -> str:
        """Its rows' verdicts in words, as the progress lines print them: one word when
        they agree (``pass``, ``not provided``), else each verdict with its clauses in
        report order (``FAIL: SYS-5; pass: SYS-1, SYS-2; not provided: SYS-12``)."""
        by_verdict: dict[Verdict, list[str]] = {}
        for clause in dict.fromkeys(self.clauses):
            by_verdict.setdefault(self.verdict_for(clause), []).append(clause)
        if len(by_verdict) <= 1:
            return next(iter(by_verdict), self.verdict).value
        return "; ".join(
            f"{verdict.value}: {', '.join(by_verdict[verdict])}"
            for verdict in VERDICT_ORDER
            if verdict in by_verdict
        )

    def why_not_provided(self) -> dict[str, str]:
        """Each "not provided" clause -> why, in words (its own reason only: a
        capability's probe answers for one clause, not for the property's others)."""
        if self.verdict is Verdict.NOT_PROVIDED:
            return dict.fromkeys(self.clauses, self.detail)
        reasons: dict[str, str] = {}
        for clause, why in self._split_detail()[0]:
            reasons[clause] = f"{reasons[clause]}; {why}" if clause in reasons else why
        return reasons

    def run_detail(self) -> str:
        """Why the run that judged the provided clauses is VACUOUS: :attr:`detail`
        without the reasons of the clauses not provided."""
        return self._split_detail()[1]

    def _split_detail(self) -> tuple[list[tuple[str, str]], str]:
        """:attr:`detail` read back: with clauses not provided for want of a capability,
        :func:`_run_if_provided` writes ``"C1: why; C2: why"`` in :attr:`not_provided`'s
        order, then ``"; "`` and the run's own detail, which only a VACUOUS run has (one
        of :func:`_run_once`'s, none holding ``"; "``). Where it does not read so, every
        clause not provided gets the whole detail: never a reason lost."""
        if not self.not_provided:
            return [], self.detail
        text, at, lacking = self.detail, 0, []
        for index, clause in enumerate(self.not_provided):
            head = f"{clause}: "
            if not text.startswith(head, at):
                return [(c, self.detail) for c in self.not_provided], ""
            start = at + len(head)
            if index + 1 < len(self.not_provided):
                end = text.find(f"; {self.not_provided[index + 1]}: ", start)
            elif self.verdict is Verdict.VACUOUS:
                end = text.rfind("; ", start)
            else:
                end = len(text)
            if end < 0:
                return [(c, self.detail) for c in self.not_provided], ""
            lacking.append((clause, text[start:end]))
            at = end + 2
        return lacking, text[at:]


def reasons_in_words(reasons: Iterable[tuple[str, str]]) -> str:
    """``(clause, why)`` pairs as one text, each reason once with the clauses it is
    given for, in order of first appearance: ``"SYS-13, SYS-14: no drafter; SYS-15:
    no async scheduling"``."""
    clauses_of: dict[str, list[str]] = {}
    for clause, why in reasons:
        clauses = clauses_of.setdefault(why, [])
        if clause not in clauses:
            clauses.append(clause)
    return "; ".join(f"{', '.join(clauses)}: {why}" for why, clauses in clauses_of.items())


@dataclass(frozen=True)
class ClauseRow:
    """One line of the report: a clause and one property that checks it."""

    clause: str
    property: str  # "—" when SPEC.md names no property for the clause
    examples: int | None
    verdict: Verdict
    implementations: str


@dataclass(frozen=True)
class Report:
    """Everything one ``verify`` run found, in SPEC.md order."""

    adapter_ref: str
    adapter_name: str
    identity: str
    profile: str
    provenance: Mapping[str, str]
    rows: tuple[ClauseRow, ...]
    results: Mapping[str, PropertyResult]
    clauses: Mapping[str, Clause]
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(row.verdict in ACCEPTED for row in self.rows)

    def counts(self) -> dict[Verdict, int]:
        counts = {v: 0 for v in VERDICT_ORDER}
        for row in self.rows:
            counts[row.verdict] += 1
        return {v: n for v, n in counts.items() if n}


class UnknownSelectionError(ValueError):
    """``--only`` named neither a property nor a clause, or not the one property a
    replay blob replays."""


ProgressFn = Callable[[int, int, str, "PropertyResult | None"], None]

#: Replaces a built property's way of running (the exhaustive checker runs the state
#: machines by breadth-first search instead of Hypothesis); it returns the runnable to
#: use, the one given when it does not apply.
RunnableTransform = Callable[[PropertySpec, Runnable], Runnable]


# --- running one property ----------------------------------------------------------------


def run_property(
    spec: PropertySpec,
    parts: Parts,
    profile: str,
    adapter_id: str,
    *,
    transitions: Mapping[str, tuple[str, ...]] | None = None,
    seed: int | None = None,
    replay: tuple[str, bytes] | None = None,
    transform: RunnableTransform | None = None,
    set_aside: Sequence[str] = (),
    per_clause: bool = True,
) -> PropertyResult:
    """Run ``spec`` on ``parts`` under ``profile`` and classify the outcome.

    ``transitions``: machine name -> the transitions it must reach (default: SPEC.md's).
    ``seed``: run under :func:`property_seed` of it instead of the profile's own
    derandomized seed (a different, equally repeatable run). ``replay``: the
    ``(version, blob)`` of a ``@reproduce_failure``: run just that one test case.
    ``transform``: see :data:`RunnableTransform`. ``set_aside``: clauses whose
    violations reject a test case instead of failing it (``--set-aside``).

    Per-clause verdicts (``per_clause``, issue 14): a property that checks several
    clauses stops at the first violated one. When the run fails only on clauses (no
    error), it is run again, same seed, with those clauses set aside
    (:func:`properties.framework.setting_aside`), and again with each new failing clause,
    until a run passes (the clauses it checked pass), fails on no new clause, or cannot
    go on; every failing clause gets its own shrunk counterexample. A clause is left
    ``blocked`` only when no test case could judge it without breaking a set-aside clause
    first, and ``blocked_because`` says which. Not with ``replay`` (one test case) or a
    ``transform`` (the exhaustive search reports one shortest path).
    """
    once = functools.partial(
        _run_once, spec, parts, profile, adapter_id, transitions, seed, replay, transform
    )
    result = once(tuple(set_aside))
    if not per_clause or replay is not None or transform is not None:
        return result
    if set_aside and result.verdict is Verdict.VACUOUS and result.transitions:
        return _judged_beside(spec, result)
    failures, aside, extra = list(result.failures), tuple(set_aside), 0.0
    if result.verdict is not Verdict.FAIL or any(f.verdict is not Verdict.FAIL for f in failures):
        return result
    while True:
        newly_failed = dict.fromkeys(f.clause for f in failures if f.clause is not None)
        aside += tuple(c for c in newly_failed if c not in aside)
        remaining = tuple(c for c in spec.clauses if c not in aside)
        if not remaining:
            return _combined(result, failures, (), "", extra)
        again = once(aside)
        extra += again.seconds
        if again.verdict is Verdict.PASS:
            return _combined(result, failures, remaining, "", extra)
        if again.verdict is Verdict.VACUOUS and again.transitions:
            judged, unreached = _judged_by_coverage(spec.name, remaining, again.transitions)
            if judged:
                why = _short_beside(aside, unreached)
                return _combined(result, failures, judged, why, extra)
        new = [f for f in again.failures if f.verdict is Verdict.FAIL and f.clause not in aside]
        if again.verdict is Verdict.FAIL and new and len(new) == len(again.failures):
            failures += new
            continue
        # An exception on the runs that keep the failing clauses (the implementation
        # crashed, or Hypothesis stopped for a reason other than "every run breaks them")
        # is no verdict on the clauses left: ERROR with it, never "blocked" (issue 32).
        crashed = [
            dataclasses.replace(f, set_aside=aside)
            for f in again.failures
            if f.verdict is Verdict.ERROR and not f.message.startswith(_UNSATISFIABLE)
        ]
        if crashed:
            return _combined(result, [*failures, *new, *crashed], (), "", extra)
        return _combined(result, failures, (), _why_not_judged(again, aside), extra)


def _judged_beside(spec: PropertySpec, result: PropertyResult) -> PropertyResult:
    """A run with clauses set aside on request (``--set-aside``, a per-clause failure's
    replay) that was VACUOUS: the clauses whose judging transitions it reached often
    enough pass, and the rest are ``blocked`` with why — the words the per-clause rerun
    of :func:`run_property` gives the same run (SPEC.md "## Transitions")."""
    remaining = tuple(c for c in spec.clauses if c not in result.set_aside)
    judged, unreached = _judged_by_coverage(spec.name, remaining, result.transitions)
    if not judged:
        return result
    why = result.blocked_because
    if unreached:
        why += "; " + _short_beside(result.set_aside, unreached)
    return dataclasses.replace(result, verdict=Verdict.BLOCKED, passed=judged, blocked_because=why)


def _short_beside(aside: Sequence[str], unreached: list[str]) -> str:
    """Why clauses stay blocked on the runs in which ``aside`` held: the transitions
    that judge them fell short there."""
    return (
        f"with runs that break {', '.join(aside)} set aside, the transitions that judge "
        f"them were reached fewer than {MIN_TRANSITION_HITS} times: " + ", ".join(unreached)
    )


def _combined(
    first: PropertyResult,
    failures: list[Failure],
    passed: tuple[str, ...],
    blocked_because: str,
    extra_seconds: float,
) -> PropertyResult:
    return dataclasses.replace(
        first,
        verdict=Verdict.FAIL,
        failures=tuple(failures),
        passed=passed,
        blocked_because=blocked_because or first.blocked_because,
        seconds=first.seconds + extra_seconds,
    )


def _judged_by_coverage(
    machine: str, clauses: tuple[str, ...], reached: tuple[tuple[str, int], ...]
) -> tuple[tuple[str, ...], list[str]]:
    """Of ``clauses``, those every transition that judges them (SPEC.md "## Transitions")
    reached ``MIN_TRANSITION_HITS`` times on a run with other clauses set aside, and the
    transitions (with their counts) that fell short for the rest."""
    judges = load_transition_judges().get(machine, {})
    counts = dict(reached)
    short = {name for name, count in reached if count < MIN_TRANSITION_HITS}
    judged = tuple(
        clause
        for clause in clauses
        if not any(clause in judges.get(name, ()) for name in short)
    )
    unreached = [
        f"{name} {counts[name]} (judges {', '.join(judges.get(name, ()))})"
        for name, _count in reached
        if name in short
    ]
    return judged, unreached


def _why_not_judged(again: PropertyResult, aside: tuple[str, ...]) -> str:
    """Why the clauses a run with ``aside`` set aside could not judge stay blocked."""
    broken = ", ".join(aside)
    if again.verdict is Verdict.VACUOUS:
        return f"with runs that break {broken} set aside, the rest was vacuous: {again.detail}"
    first = next(iter(again.failures), None)
    if first is not None and first.message.startswith("Hypothesis stopped the run"):
        return f"every run breaks {broken} before it can judge them ({first.message})"
    reason = first.message if first is not None else again.detail
    return f"with runs that break {broken} set aside, the run ended in an error: {reason}"


def _run_once(
    spec: PropertySpec,
    parts: Parts,
    profile: str,
    adapter_id: str,
    transitions: Mapping[str, tuple[str, ...]] | None,
    seed: int | None,
    replay: tuple[str, bytes] | None,
    transform: RunnableTransform | None,
    set_aside: tuple[str, ...],
) -> PropertyResult:
    """One run of ``spec`` (see :func:`run_property`), ``set_aside`` clauses set aside."""
    declared_by_machine = load_transitions() if transitions is None else transitions
    settings = settings_for(profile, adapter_id)
    if set_aside:
        # Rejected test cases are expected here (every one that breaks a set-aside
        # clause): let Hypothesis go on generating instead of stopping at its health
        # check; too few valid runs still end as Unsatisfiable or VACUOUS (blocked).
        suppressed = (*settings.suppress_health_check, HealthCheck.filter_too_much)
        settings = Settings(settings, suppress_health_check=suppressed)
    started = time.perf_counter()
    scope = ""  # the built Runnable's, once built

    def result(
        verdict: Verdict,
        examples: int = 0,
        failures: tuple[Failure, ...] = (),
        transitions: tuple[tuple[str, int], ...] = (),
        detail: str = "",
    ) -> PropertyResult:
        return PropertyResult(
            spec.name,
            spec.clauses,
            verdict,
            examples,
            failures,
            transitions,
            detail,
            seconds=time.perf_counter() - started,
            set_aside=set_aside,
            blocked_because=(
                f"set aside: --set-aside {' '.join(set_aside)}" if set_aside
                else _REPLAYED_ONE if replay is not None else ""
            ),
            scope=scope,
        )

    try:
        runnable = spec.build(parts)
        if transform is not None:
            runnable = transform(spec, runnable)
    except Exception as e:  # noqa: BLE001 - a property that cannot be built is an error
        failure = Failure(
            Verdict.ERROR,
            None,
            f"building the property raised {_located(e)}",
            _notes(e),
        )
        return result(Verdict.ERROR, failures=(failure,))
    scope = runnable.scope
    runnable.seed = None if seed is None else property_seed(seed, spec.name)
    runnable.replay = replay
    printed: list[str] = []
    try:
        with _kept(printed), setting_aside(set_aside), beating(spec.name, runnable, set_aside):
            runnable.run(settings)
    except Exception as e:  # noqa: BLE001 - every outcome is classified below
        failures = tuple(_classify(e, spec, set_aside))
        failures = tuple(_told(f, tuple(printed), replay) for f in failures)
        verdict = (
            Verdict.FAIL if any(f.verdict is Verdict.FAIL for f in failures) else Verdict.ERROR
        )
        return result(
            verdict,
            runnable.examples,
            failures=failures,
            transitions=_counts(declared_by_machine, runnable.machine_name, runnable.transitions),
        )
    if runnable.examples == 0:
        return result(Verdict.VACUOUS, 0, detail="no test case ran")
    if runnable.machine_name is None:
        return result(Verdict.PASS, runnable.examples)
    if runnable.machine_name not in declared_by_machine:
        return result(
            Verdict.VACUOUS,
            runnable.examples,
            detail=f"SPEC.md declares no transitions for the machine {runnable.machine_name}",
        )
    counts = _counts(declared_by_machine, runnable.machine_name, runnable.transitions)
    short = [f"{name} {count}" for name, count in counts if count < MIN_TRANSITION_HITS]
    if short:
        return result(
            Verdict.VACUOUS,
            runnable.examples,
            transitions=counts,
            detail=(
                f"transitions reached fewer than {MIN_TRANSITION_HITS} times: " + ", ".join(short)
            ),
        )
    return result(Verdict.PASS, runnable.examples, transitions=counts)


def property_seed(seed: int, name: str) -> int:
    """The Hypothesis seed of property ``name`` in a run seeded with ``seed``: one
    per property, so that properties do not share a random stream, and a function of
    the two alone, so that the same seed gives the same test cases."""
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _counts(
    declared_by_machine: Mapping[str, tuple[str, ...]],
    machine_name: str | None,
    reached: Mapping[str, int],
) -> tuple[tuple[str, int], ...]:
    """Each transition declared for the machine, with how often the model reached it."""
    if machine_name is None:
        return ()
    declared = declared_by_machine.get(machine_name, ())
    return tuple((name, reached.get(name, 0)) for name in declared)


def _classify(
    error: BaseException, spec: PropertySpec, set_aside: tuple[str, ...] = ()
) -> Iterator[Failure]:
    """One :class:`Failure` per distinct failure inside ``error``."""
    for leaf, notes in _leaves(error, ()):
        counterexample, reproduce = _split_notes(notes)
        if isinstance(leaf, ClauseViolation):
            if leaf.clause in spec.clauses:
                yield Failure(
                    Verdict.FAIL, leaf.clause, leaf.detail, counterexample, reproduce, set_aside
                )
            else:
                message = (
                    f"the property reported a violation of {leaf.clause}, which it does not "
                    f"declare ({', '.join(spec.clauses)}): {leaf.detail}"
                )
                yield Failure(Verdict.ERROR, None, message, counterexample, reproduce)
        elif type(leaf).__module__.startswith("hypothesis"):
            message = f"Hypothesis stopped the run: {type(leaf).__name__}: {leaf}"
            yield Failure(Verdict.ERROR, None, message, counterexample, reproduce)
        else:
            message = f"implementation raised {_located(leaf)}"
            yield Failure(Verdict.ERROR, None, message, counterexample, reproduce)


def _leaves(
    error: BaseException, inherited: tuple[str, ...]
) -> Iterator[tuple[BaseException, tuple[str, ...]]]:
    """Flatten exception groups (Hypothesis reports distinct failures as one group),
    carrying the group's notes down to its members."""
    notes = inherited + _notes(error)
    if isinstance(error, BaseExceptionGroup):
        if isinstance(error, FlakyFailure):
            notes += ("(Hypothesis: this failure did not reproduce reliably on replay)",)
        for member in error.exceptions:
            yield from _leaves(member, notes)
    else:
        yield error, notes


def _notes(error: BaseException) -> tuple[str, ...]:
    return tuple(str(n) for n in getattr(error, "__notes__", ()))


#: Why a replay's other clauses are not judged.
_REPLAYED_ONE = "a replay runs the one test case: the whole run judges them"


def _kept(printed: list[str]) -> contextlib.AbstractContextManager[None]:
    """Keep what Hypothesis prints during a run (``report()``: a replayed test case's
    narration, the steps before a ``FlakyStrategyDefinition``) in ``printed``, for the
    failure it belongs to, instead of letting it reach the user's terminal beside the
    report (``grade --quiet`` printed "Steps leading up to this error"). A reporter of
    a caller's own (the grader recording a reproducer's narration) still hears it."""
    outer = current_reporter()

    def keep(value: object) -> None:
        printed.extend(str(value).splitlines())
        if outer is not default_reporter:
            outer(value)

    return with_reporter(keep)


def _told(
    failure: Failure, printed: tuple[str, ...], replay: tuple[str, bytes] | None
) -> Failure:
    """``failure`` with what Hypothesis printed as its counterexample when none came
    with the error, and, replayed, the blob it replayed as its reproduce line."""
    counterexample = failure.counterexample or _split_notes(printed)[0]
    reproduce = failure.reproduce
    if replay is not None and reproduce is None:
        version, blob = replay
        reproduce = f"@reproduce_failure({version!r}, {blob!r})"
    return dataclasses.replace(failure, counterexample=counterexample, reproduce=reproduce)


def _split_notes(notes: tuple[str, ...]) -> tuple[tuple[str, ...], str | None]:
    """Separate Hypothesis' reproduce-failure advice from the counterexample."""
    kept: list[str] = []
    reproduce: str | None = None
    for note in notes:
        match = _REPRODUCE.search(note)
        if match:
            reproduce = match.group(0)
        else:
            kept.append(note)
    return tuple(kept), reproduce


def _located(error: BaseException) -> str:
    """``Type: message (at file:line in function)`` — where the innermost frame is."""
    text = f"{type(error).__name__}: {error}"
    frames = traceback.extract_tb(error.__traceback__)
    if frames:
        last = frames[-1]
        try:
            where = str(Path(last.filename).resolve().relative_to(_CHECKOUT_ROOT))
        except ValueError:
            where = last.filename
        text += f" (at {where}:{last.lineno} in {last.name})"
    return text


# --- running the suite -------------------------------------------------------------------


def plan(
    clauses: Mapping[str, Clause], registry: Mapping[str, PropertySpec]
) -> list[tuple[str, str | None]]:
    """Every (clause, property) pair in SPEC.md order: the properties each clause names,
    then registered properties that declare the clause without being named, then
    properties declaring clauses SPEC.md does not have. ``None``: no property at all."""
    pairs: list[tuple[str, str | None]] = []
    for clause_id, clause in clauses.items():
        names = list(clause.checked_by)
        names += [n for n, s in registry.items() if clause_id in s.clauses and n not in names]
        pairs.extend((clause_id, n) for n in names)
        if not names:
            pairs.append((clause_id, None))
    for name, spec in registry.items():
        pairs.extend((c, name) for c in spec.clauses if c not in clauses)
    return pairs


def verify(
    adapter_ref: str,
    profile: str = DEFAULT_PROFILE,
    only: Sequence[str] | None = None,
    *,
    registry: Mapping[str, PropertySpec] | None = None,
    clauses: Mapping[str, Clause] | None = None,
    fallback_ref: str | None = REFERENCE_REF,
    transitions: Mapping[str, tuple[str, ...]] | None = None,
    progress: ProgressFn | None = None,
    seed: int | None = None,
    session: IsolatedSession | None = None,
    transform: RunnableTransform | None = None,
    set_aside: Sequence[str] = (),
    per_clause: bool = True,
    jobs: int = 1,
    heartbeat: Callable[[str], None] | None = None,
    replay: tuple[str, bytes] | None = None,
) -> Report:
    """Load the adapter, run every registered property (``only``: these property names
    or clause ids) and report one row per (clause, property) in SPEC.md order.

    Raises :class:`~harness.loader.AdapterLoadError` for a malformed adapter (or
    fallback) and :class:`UnknownSelectionError` for an unknown ``only`` name.
    ``seed``, ``transform``, ``set_aside``, ``per_clause``: see :func:`run_property`
    (``set_aside`` applies to the properties that check those clauses). ``session``: run the adapter
    isolated in that session's child process (:mod:`harness.isolation`; it must be for
    ``adapter_ref``): the adapter is never imported here, and each property gets a live child.
    ``jobs``: run the properties in that many forked processes (each property's seed is
    its own, so the report is the one ``jobs=1`` gives); isolated, each worker starts a
    child of its own (under a sandbox, at most one worker per worker user:
    :meth:`IsolatedSession.workers`).
    ``heartbeat``: hears a line every few seconds while a property runs
    (:mod:`harness.heartbeat`: how many examples so far). ``replay``: the ``(version,
    blob)`` of a ``@reproduce_failure``: run just that one test case of the one property
    ``only`` selects (:class:`UnknownSelectionError` if it selects several).
    """
    started = time.perf_counter()
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    registry = registered_properties() if registry is None else registry
    clauses = load_clauses() if clauses is None else clauses
    pairs = plan(clauses, registry)
    if only:
        pairs = _select(pairs, only)
    # The student kit has no reference: nothing stands in, and what needed it says so.
    absent = absent_provenance(fallback_ref)
    fallback_ref = fallback_for(fallback_ref)
    if session is None:
        loaded = load_adapter(adapter_ref)
        fallback = _fallback(loaded, fallback_ref)
        parts = build_parts(loaded.adapter, fallback.adapter if fallback else None, absent)
    else:
        loaded = session.loaded
        fallback = load_adapter(fallback_ref) if fallback_ref is not None else None
        parts = session.parts(fallback.adapter if fallback else None, absent)

    to_run = list(dict.fromkeys(n for _, n in pairs if n is not None and n in registry))
    if replay is not None and len(to_run) != 1:
        raise UnknownSelectionError(
            f"a replay blob replays one example of one property: --only selects {len(to_run)}"
            + (f" ({', '.join(to_run)})" if to_run else "")
        )

    def run_one(name: str) -> PropertyResult:
        if session is not None:
            session.begin_property(name)
        spec = registry[name]
        return _run_if_provided(
            spec, loaded, parts, profile, transitions, seed, transform,
            tuple(c for c in set_aside if c in spec.clauses), per_clause, replay,
        )

    judged_by_engine = _engine_owners(parts)
    with listening(heartbeat):
        results = _run_all(to_run, run_one, jobs if session is None else session.workers(jobs),
                           progress)
    rows = tuple(
        _row(clause, name, registry, results, parts, judged_by_engine) for clause, name in pairs
    )
    return Report(
        adapter_ref=adapter_ref,
        adapter_name=loaded.name,
        identity=loaded.identity,
        profile=profile,
        provenance=dict(parts.provenance),
        rows=rows,
        results=results,
        clauses=clauses,
        seconds=time.perf_counter() - started,
    )


def _run_all(
    to_run: list[str],
    run_one: Callable[[str], PropertyResult],
    jobs: int,
    progress: ProgressFn | None,
) -> dict[str, PropertyResult]:
    """``run_one`` of each name, in ``jobs`` forked processes when more than one."""
    results: dict[str, PropertyResult] = {}
    if jobs > 1 and len(to_run) > 1:
        for index, result in enumerate(_forked_in_order(to_run, run_one, jobs), 1):
            if progress:
                progress(index, len(to_run), result.name, None)
                progress(index, len(to_run), result.name, result)
            results[result.name] = result
    else:
        for index, name in enumerate(to_run, 1):
            if progress:
                progress(index, len(to_run), name, None)
            results[name] = run_one(name)
            if progress:
                progress(index, len(to_run), name, results[name])
    return results


#: What the forked workers of :func:`_forked_in_order` run: set just before the pool
#: forks, so that each worker inherits it (the adapter, its parts and the closure are
#: never pickled; only names go out and results come back).
_FORKED_RUN: Callable[[str], PropertyResult] | None = None


def _run_forked(name: str) -> PropertyResult:
    assert _FORKED_RUN is not None, "only a worker forked by _forked_in_order runs this"
    return _FORKED_RUN(name)


def _forked_in_order(
    names: list[str], run_one: Callable[[str], PropertyResult], jobs: int
) -> Iterator[PropertyResult]:
    """``run_one`` of every name in ``jobs`` forked processes, results in ``names``'
    order. Each property runs under its own seed (the profile's derandomized one, or
    :func:`property_seed`), so which process runs it, and when, changes nothing."""
    global _FORKED_RUN
    _FORKED_RUN = run_one
    try:
        with multiprocessing.get_context("fork").Pool(min(jobs, len(names))) as pool:
            yield from pool.imap(_run_forked, names)
    finally:
        _FORKED_RUN = None


def _select(
    pairs: list[tuple[str, str | None]], only: Sequence[str]
) -> list[tuple[str, str | None]]:
    known_clauses = {c for c, _ in pairs}
    known_names = {n for _, n in pairs if n is not None}
    unknown = [o for o in only if o not in known_clauses and o not in known_names]
    if unknown:
        raise UnknownSelectionError(
            f"--only {', '.join(unknown)}: no such property or clause "
            f"(`{COMMAND} list` shows them)"
        )
    wanted = set(only)
    return [(c, n) for c, n in pairs if c in wanted or n in wanted]


def _fallback(loaded: LoadedAdapter, fallback_ref: str | None) -> LoadedAdapter | None:
    if fallback_ref is None:
        return None
    if loaded.ref == fallback_ref:
        return loaded
    return load_adapter(fallback_ref)


def _needed_by(spec: PropertySpec, probe: Callable[[Parts], str | None]) -> str:
    """``"SYS-1 to SYS-9 need"``, ``"ECD-6 needs"``: the clauses one probe answers for
    (a machine's clauses share one probe: naming only the first misleads)."""
    clauses = [clause for clause, other in spec.capabilities if other is probe]
    if len(clauses) == 1:
        return f"{clauses[0]} needs"
    return f"{', '.join(clauses[:-1])} and {clauses[-1]} need"


def _run_if_provided(
    spec: PropertySpec,
    loaded: LoadedAdapter,
    parts: Parts,
    profile: str,
    transitions: Mapping[str, tuple[str, ...]] | None,
    seed: int | None = None,
    transform: RunnableTransform | None = None,
    set_aside: tuple[str, ...] = (),
    per_clause: bool = True,
    replay: tuple[str, bytes] | None = None,
) -> PropertyResult:
    absent = [c for c in spec.subject if not loaded.provides(c)]
    if spec.subject_any and len(absent) < len(spec.subject):
        absent = []  # it provides some of them: run, with the reference for the rest
    if absent:
        return PropertyResult(
            spec.name,
            spec.clauses,
            Verdict.NOT_PROVIDED,
            detail=f"{loaded.name} does not provide {', '.join(absent)}",
        )
    # A component neither the adapter nor the reference has: the run could only crash.
    used = (*spec.subject, *spec.uses)
    nobody = [c for c in used if parts.provenance.get(c) == NOT_PROVIDED]
    # In the student kit, where the reference would have stood in: not judged here.
    stand_ins = [c for c in used if parts.provenance.get(c) == NEEDS_REFERENCE]
    if stand_ins and not nobody:
        return PropertyResult(
            spec.name,
            spec.clauses,
            Verdict.NEEDS_REFERENCE,
            detail=f"needs the reference for {', '.join(stand_ins)}, which {loaded.name} "
            "does not provide (the student kit has no reference): graded on the autograder",
        )
    if nobody:
        return PropertyResult(
            spec.name,
            spec.clauses,
            Verdict.NOT_PROVIDED,
            detail=f"no implementation provides {', '.join(nobody)}",
        )
    # Probed first, inside the property's fresh time allowance (isolated, the probe
    # builds a component in the child). A probe answers whether the adapter provides a
    # capability; one that raises has not answered, and a crash is never read as an
    # absence (issue 32): the property is an ERROR with the exception, and not run.
    started = time.perf_counter()
    lacking: list[tuple[str, str]] = []
    for clause, probe in spec.capabilities:
        try:
            why = _probed(probe, parts)
        except Exception as e:  # noqa: BLE001 - reported as the property's error
            failure = Failure(
                Verdict.ERROR,
                None,
                f"probing whether {loaded.name} provides the optional capability "
                f"{_needed_by(spec, probe)} raised {_located(e)}",
                _notes(e),
            )
            return PropertyResult(
                spec.name,
                spec.clauses,
                Verdict.ERROR,
                failures=(failure,),
                seconds=time.perf_counter() - started,
            )
        if why:
            lacking.append((clause, why))
    result = run_property(
        spec, parts, profile, loaded.identity, transitions=transitions, seed=seed,
        transform=transform, set_aside=set_aside, per_clause=per_clause, replay=replay,
    )
    if not lacking:
        return result
    return dataclasses.replace(
        result,
        not_provided=tuple(clause for clause, _ in lacking),
        detail="; ".join(f"{clause}: {why}" for clause, why in lacking) + (
            f"; {result.detail}" if result.detail else ""
        ),
    )


def _probed(probe: Callable[[Parts], str | None], parts: Parts) -> str | None:
    """Why the adapter lacks the capability (None: it has it), as the probe says, or as
    the implementation says by raising ``NotImplementedError`` (a method still marked
    ``@todo`` in the student template; the reference engine loop around a cache manager
    without ``reset()``). Any other exception propagates: it is an error, not an answer."""
    try:
        return probe(parts)
    except NotImplementedError as e:
        return f"not implemented (NotImplementedError: {e})"


def _engine_owners(parts: Parts) -> Mapping[str, str]:
    """Who provides each part of the engine composition: ``parts.provenance``, but for
    the worker store where the engine loop standing in is given the fallback's, since
    the adapter's keeps its own cache (:func:`harness.loader.build_parts`): a row an
    engine machine judged names the code it ran."""
    owners = dict(parts.provenance)
    if parts.engine_worker_store is None:
        return owners
    try:
        swapped = keeps_own_cache(parts.worker_store())
    except Exception:  # noqa: BLE001 - a store that cannot be built is its rows' error
        return owners
    if swapped:
        owners["worker_store"] = owners.get("engine_loop", "?")
    return owners


def _row(
    clause: str,
    name: str | None,
    registry: Mapping[str, PropertySpec],
    results: Mapping[str, PropertyResult],
    parts: Parts,
    engine_owners: Mapping[str, str],
) -> ClauseRow:
    if name is None or name not in registry:
        return ClauseRow(clause, name or "—", None, Verdict.MISSING, "")
    spec = registry[name]
    result = results[name]
    provenance = engine_owners if "engine_loop" in spec.subject else parts.provenance
    owners = dict.fromkeys(provenance.get(c, "?") for c in spec.subject)
    return ClauseRow(clause, name, result.examples, result.verdict_for(clause), ", ".join(owners))

"""The runner's classification of outcomes, on a fixture adapter and fake properties.

Each fake property is a real Hypothesis test or state machine; the registry and the
clauses are the test's own, so these tests do not depend on SPEC.md or the catalog.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from hypothesis import Phase, given, note
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import harness.runner as runner_module
from harness import cli, profiles
from harness.report import render, summary_line
from harness.runner import Report, Verdict, verify
from properties.framework import (
    ClauseViolation,
    ComponentName,
    Parts,
    PropertySpec,
    Runnable,
    TransitionRecorder,
    check,
    machine,
    stateless,
)
from spec.clauses import MIN_TRANSITION_HITS, Clause

GOOD = str(Path(__file__).resolve().parent / "fixtures" / "good_adapter.py")


def clause(clause_id: str, *checked_by: str) -> Clause:
    return Clause(
        id=clause_id,
        title=f"title of {clause_id}",
        statement=f"statement of {clause_id}",
        symptom=f"symptom of {clause_id}",
        upstream="upstream",
        checked_by=checked_by,
    )


def prop(
    name: str,
    clauses: tuple[str, ...],
    build: Callable[[Parts], Runnable],
    subject: tuple[ComponentName, ...] = ("hasher",),
) -> PropertySpec:
    return PropertySpec(name, clauses, subject, (), build, __name__)


def run(
    specs: list[PropertySpec],
    clauses: list[Clause],
    transitions: Mapping[str, tuple[str, ...]] | None = None,
    only: list[str] | None = None,
    fallback_ref: str | None = None,
) -> Report:
    return verify(
        GOOD,
        "ci",
        only,
        registry={s.name: s for s in specs},
        clauses={c.id: c for c in clauses},
        fallback_ref=fallback_ref,
        transitions=transitions or {},
    )


# --- fake properties ---------------------------------------------------------------------


def hash_is_deterministic(parts: Parts) -> Runnable:
    hasher = parts.hasher()

    @given(st.binary(max_size=16))
    def test(data: bytes) -> None:
        check(hasher.hash_item(data) == hasher.hash_item(bytes(data)), "FAKE-1", "unstable")

    return stateless(test)


def small_numbers_only(parts: Parts) -> Runnable:
    @given(st.integers(min_value=0))
    def test(x: int) -> None:
        note(f"the number is {x}")
        check(x < 10, "FAKE-2", f"{x} is not below 10")

    return stateless(test)


def implementation_crashes(parts: Parts) -> Runnable:
    table: dict[int, str] = {}

    @given(st.integers(min_value=0, max_value=3))
    def test(x: int) -> None:
        table[x]  # the "implementation" has no entry: KeyError escapes

    return stateless(test)


def two_distinct_bugs(parts: Parts) -> Runnable:
    @given(st.integers())
    def test(x: int) -> None:
        check(x <= 1000, "FAKE-2", f"{x} is too large")
        check(x >= -1000, "FAKE-3", f"{x} is too small")

    return stateless(test)


def wrong_clause(parts: Parts) -> Runnable:
    @given(st.integers())
    def test(x: int) -> None:
        raise ClauseViolation("OTHER-9", "a clause the property does not declare")

    return stateless(test)


class Ticker(TransitionRecorder, RuleBasedStateMachine):
    """Reaches ``tick`` on every step and ``rare`` only when the counter hits 10**6."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    @rule(n=st.integers(min_value=1, max_value=3))
    def advance(self, n: int) -> None:
        self.count += n
        self.reached("tick")
        if self.count >= 10**6:
            self.reached("rare")


class BrokenTicker(Ticker):
    @rule()
    def overflow(self) -> None:
        check(self.count < 5, "FAKE-4", f"count {self.count} reached 5")


# --- the verdicts ------------------------------------------------------------------------


def test_pass_counts_examples_and_names_the_implementation() -> None:
    report = run([prop("hash_det", ("FAKE-1",), hash_is_deterministic)], [clause("FAKE-1")])
    (row,) = report.rows
    assert (row.clause, row.property, row.verdict) == ("FAKE-1", "hash_det", Verdict.PASS)
    assert row.examples is not None and row.examples >= 50
    assert row.implementations == "fixture-good"
    assert report.provenance["hasher"] == "fixture-good"
    assert report.provenance["splice"] == "not provided"
    assert report.ok


def test_fail_carries_clause_message_counterexample_and_replay() -> None:
    report = run([prop("small", ("FAKE-2",), small_numbers_only)], [clause("FAKE-2")])
    assert not report.ok
    (row,) = report.rows
    assert row.verdict is Verdict.FAIL
    (failure,) = report.results["small"].failures
    assert failure.clause == "FAKE-2"
    assert failure.message == "10 is not below 10"  # shrunk to the boundary
    notes = "\n".join(failure.counterexample)
    assert "x=10" in notes and "the number is 10" in notes
    assert failure.reproduce is not None and failure.reproduce.startswith("@reproduce_failure(")
    text = render(report)
    for expected in (
        "== FAIL small (FAKE-2) ==",
        "statement: statement of FAKE-2",
        "symptom: symptom of FAKE-2",
        "message: 10 is not below 10",
        "the number is 10",
        f"python -m properties verify --adapter {GOOD} --profile ci --only small",
        "reproduce blob: @reproduce_failure(",
    ):
        assert expected in text, expected


def test_an_escaping_exception_is_an_error_not_a_verdict() -> None:
    report = run([prop("crash", ("FAKE-3",), implementation_crashes)], [clause("FAKE-3")])
    (row,) = report.rows
    assert row.verdict is Verdict.ERROR
    (failure,) = report.results["crash"].failures
    assert failure.clause is None
    assert failure.message.startswith("implementation raised KeyError: 0 (at tests/test_runner.py")
    assert any("x=0" in n for n in failure.counterexample)


def test_distinct_failures_are_each_reported() -> None:
    spec = prop("bounds", ("FAKE-2", "FAKE-3"), two_distinct_bugs)
    report = run([spec], [clause("FAKE-2"), clause("FAKE-3")])
    assert [r.verdict for r in report.rows] == [Verdict.FAIL, Verdict.FAIL]
    failures = report.results["bounds"].failures
    assert sorted(f.clause or "" for f in failures) == ["FAKE-2", "FAKE-3"]
    assert "-- failure 2 of 2 --" in render(report)


def test_a_violation_of_an_undeclared_clause_is_an_error() -> None:
    report = run([prop("stray", ("FAKE-1",), wrong_clause)], [clause("FAKE-1")])
    (failure,) = report.results["stray"].failures
    assert report.rows[0].verdict is Verdict.ERROR
    assert "OTHER-9, which it does not declare" in failure.message


def test_a_machine_that_misses_a_declared_transition_is_vacuous() -> None:
    spec = prop("Ticker", ("FAKE-4",), lambda parts: machine(Ticker))
    report = run([spec], [clause("FAKE-4")], transitions={"Ticker": ("tick", "rare")})
    result = report.results["Ticker"]
    assert result.verdict is Verdict.VACUOUS
    counts = dict(result.transitions)
    assert counts["rare"] == 0 and counts["tick"] >= MIN_TRANSITION_HITS
    assert result.detail == f"transitions reached fewer than {MIN_TRANSITION_HITS} times: rare 0"
    assert not report.ok
    assert "why: transitions reached fewer than" in render(report)


def test_a_machine_that_reaches_every_transition_passes() -> None:
    spec = prop("Ticker", ("FAKE-4",), lambda parts: machine(Ticker))
    report = run([spec], [clause("FAKE-4")], transitions={"Ticker": ("tick",)})
    assert report.results["Ticker"].verdict is Verdict.PASS
    assert report.ok


def test_a_machine_without_declared_transitions_is_vacuous() -> None:
    spec = prop("Ticker", ("FAKE-4",), lambda parts: machine(Ticker))
    report = run([spec], [clause("FAKE-4")], transitions={})
    assert report.results["Ticker"].verdict is Verdict.VACUOUS
    assert "declares no transitions" in report.results["Ticker"].detail


def test_other_clauses_of_a_stopped_machine_are_judged_on_the_runs_that_keep_it() -> None:
    """Per-clause verdicts: FAKE-4 fails; run again with its violations set aside, the
    machine judges FAKE-5 on the runs in which FAKE-4 held."""
    spec = prop("BrokenTicker", ("FAKE-4", "FAKE-5"), lambda parts: machine(BrokenTicker))
    report = run([spec], [clause("FAKE-4"), clause("FAKE-5")], {"BrokenTicker": ("tick",)})
    assert [(r.clause, r.verdict) for r in report.rows] == [
        ("FAKE-4", Verdict.FAIL),
        ("FAKE-5", Verdict.PASS),
    ]
    result = report.results["BrokenTicker"]
    (failure,) = result.failures
    assert any("state = BrokenTicker()" in n for n in failure.counterexample)
    assert result.passed == ("FAKE-5",) and not report.ok


class AlwaysBroken(Ticker):
    """Breaks FAKE-4 in every run, before anything else: FAKE-5 can never be judged."""

    @initialize()
    def broken_at_once(self) -> None:
        check(False, "FAKE-4", "broken from the start")

    @invariant()
    def other(self) -> None:
        check(self.count >= 0, "FAKE-5", "negative count")


def test_a_clause_no_run_can_judge_stays_blocked_and_says_why() -> None:
    spec = prop("AlwaysBroken", ("FAKE-4", "FAKE-5"), lambda parts: machine(AlwaysBroken))
    report = run([spec], [clause("FAKE-4"), clause("FAKE-5")], {"AlwaysBroken": ("tick",)})
    assert [(r.clause, r.verdict) for r in report.rows] == [
        ("FAKE-4", Verdict.FAIL),
        ("FAKE-5", Verdict.BLOCKED),
    ]
    because = report.results["AlwaysBroken"].blocked_because
    assert because.startswith("every run breaks FAKE-4 before it can judge them"), because
    assert "FAKE-5 (every run breaks FAKE-4" in render(report)


def test_a_component_the_adapter_lacks_is_not_provided_and_not_run() -> None:
    def must_not_run(parts: Parts) -> Runnable:
        raise AssertionError("a property about an absent component was built")

    spec = prop("splice_prop", ("FAKE-1",), must_not_run, subject=("splice",))
    report = run([spec], [clause("FAKE-1")])
    (row,) = report.rows
    assert row.verdict is Verdict.NOT_PROVIDED
    assert report.results["splice_prop"].detail == "fixture-good does not provide splice"
    assert report.ok  # not provided is not a failure, and never shown as passed


def test_a_used_component_nobody_provides_is_not_provided() -> None:
    spec = PropertySpec("uses_encoder", ("FAKE-1",), ("hasher",), ("encoder",),
                        hash_is_deterministic, __name__)  # fmt: skip
    report = run([spec], [clause("FAKE-1")])  # no fallback: nobody has an encoder
    assert report.rows[0].verdict is Verdict.NOT_PROVIDED
    assert report.results["uses_encoder"].detail == "no implementation provides encoder"


def test_a_composite_runs_when_the_adapter_provides_any_subject() -> None:
    composite = PropertySpec("composite", ("FAKE-1",), ("encoder", "hasher"), (),
                             hash_is_deterministic, __name__, subject_any=True)  # fmt: skip
    # The adapter has the hasher; the reference stands in for the encoder.
    report = run([composite], [clause("FAKE-1")], fallback_ref="reference")
    assert report.rows[0].verdict is Verdict.PASS
    assert report.rows[0].implementations == "reference, fixture-good"
    encoder_only = PropertySpec("composite", ("FAKE-1",), ("encoder",), (),
                                hash_is_deterministic, __name__, subject_any=True)  # fmt: skip
    report = run([encoder_only], [clause("FAKE-1")], fallback_ref="reference")
    assert report.rows[0].verdict is Verdict.NOT_PROVIDED


def test_a_clause_without_a_registered_property_fails_the_run() -> None:
    spec = prop("hash_det", ("FAKE-1",), hash_is_deterministic)
    clauses = [clause("FAKE-1", "hash_det"), clause("FAKE-2", "never_written"), clause("FAKE-3")]
    report = run([spec], clauses)
    assert [(r.clause, r.property, r.verdict) for r in report.rows] == [
        ("FAKE-1", "hash_det", Verdict.PASS),
        ("FAKE-2", "never_written", Verdict.MISSING),
        ("FAKE-3", "—", Verdict.MISSING),
    ]
    assert not report.ok
    text = render(report)
    assert "FAKE-2: SPEC.md names `never_written`, which no property module registers" in text
    assert "FAKE-3: SPEC.md names no property that checks it" in text


def test_rows_follow_spec_order_and_only_selects() -> None:
    specs = [
        prop("small", ("FAKE-2",), small_numbers_only),
        prop("hash_det", ("FAKE-1",), hash_is_deterministic),
    ]
    clauses = [clause("FAKE-1", "hash_det"), clause("FAKE-2", "small")]
    report = run(specs, clauses)
    assert [r.clause for r in report.rows] == ["FAKE-1", "FAKE-2"]
    only = run(specs, clauses, only=["hash_det"])
    assert [r.property for r in only.rows] == ["hash_det"]
    assert list(only.results) == ["hash_det"]
    by_clause = run(specs, clauses, only=["FAKE-2"])
    assert list(by_clause.results) == ["small"]
    with pytest.raises(runner_module.UnknownSelectionError, match="nonesuch"):
        run(specs, clauses, only=["nonesuch"])


def test_report_is_deterministic_except_the_summary_line() -> None:
    specs = [
        prop("hash_det", ("FAKE-1",), hash_is_deterministic),
        prop("small", ("FAKE-2",), small_numbers_only),
    ]
    clauses = [clause("FAKE-1"), clause("FAKE-2")]
    first, second = render(run(specs, clauses)), render(run(specs, clauses))
    assert first.splitlines()[:-1] == second.splitlines()[:-1]
    assert first.splitlines()[-1].startswith("FAILED: 2 clause rows (1 pass, 1 FAIL) in ")


def test_summary_line_counts_verdicts() -> None:
    report = run([prop("hash_det", ("FAKE-1",), hash_is_deterministic)], [clause("FAKE-1")])
    assert summary_line(report).startswith("OK: 1 clause row (1 pass) in ")


def test_cli_exit_codes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = {
        "hash_det": prop("hash_det", ("FAKE-1",), hash_is_deterministic),
        "small": prop("small", ("FAKE-2",), small_numbers_only),
    }
    clauses = {"FAKE-1": clause("FAKE-1"), "FAKE-2": clause("FAKE-2")}
    monkeypatch.setattr(runner_module, "registered_properties", lambda: registry)
    monkeypatch.setattr(runner_module, "load_clauses", lambda: clauses)
    assert cli.main(["verify", "--adapter", GOOD, "--only", "hash_det"]) == 0
    assert cli.main(["verify", "--adapter", GOOD, "--only", "small"]) == 1
    assert cli.main(["verify", "--adapter", GOOD, "--only", "nonesuch"]) == 2
    captured = capsys.readouterr()
    assert "[1/1] hash_det ... pass" in captured.err
    assert "--only nonesuch: no such property or clause" in captured.err


# --- profiles ----------------------------------------------------------------------------


def test_deterministic_profiles_have_no_database() -> None:
    for name in ("ci", "mutation", "grading"):
        chosen = profiles.settings_for(name, "any-adapter")
        assert chosen.derandomize and chosen.database is None, name
    assert Phase.shrink not in profiles.settings_for("mutation", "x").phases
    assert profiles.settings_for("thorough", "x").max_examples == 2000
    with pytest.raises(ValueError, match="unknown profile"):
        profiles.settings_for("nonesuch", "x")


def test_dev_database_writes_its_own_directory_and_only_reads_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "EXAMPLES_ROOT", tmp_path)
    other = DirectoryBasedExampleDatabase(tmp_path / "student-123")
    other.save(b"key", b"found against the student")
    database = profiles.settings_for("dev", "reference-456").database
    assert database is not None
    assert list(database.fetch(b"key")) == [b"found against the student"]
    database.delete(b"key", b"found against the student")  # a pass on the reference
    database.save(b"key", b"found against the reference")
    assert list(other.fetch(b"key")) == [b"found against the student"]
    own = DirectoryBasedExampleDatabase(tmp_path / "reference-456")
    assert list(own.fetch(b"key")) == [b"found against the reference"]


def test_forked_jobs_give_the_report_one_process_gives() -> None:
    """``--jobs 2`` (make verify): the same rows, verdicts, failures and counterexamples,
    in the same order, as one process — each property runs under its own seed. A buggy
    adapter, so that failures (with their counterexamples) come back from the workers."""
    adapter = "adapters/zoo/ecm_newest_first_eviction.py"
    only = ["EncoderCacheMachine", "SPL-4", "HASH-2", "exp_total_length"]
    one = verify(adapter, "ci", only)
    two = verify(adapter, "ci", only, jobs=2)
    assert two.rows == one.rows
    assert list(two.results) == list(one.results)
    for name, result in one.results.items():
        forked = two.results[name]
        assert dataclasses.replace(forked, seconds=0.0) == dataclasses.replace(result, seconds=0.0)
    assert any(r.verdict is Verdict.FAIL for r in one.rows)


def test_a_long_property_says_how_far_it_is_without_changing_its_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 31: a property running for more than a few seconds reports the examples (or
    machine programs) done so far; the beat only reads the counter, so the report is the
    one a silent run gives."""
    from harness import heartbeat

    monkeypatch.setattr(heartbeat, "EVERY_SECONDS", 0.05)
    only = ["EncoderCacheMachine", "exp_total_length"]
    lines: list[str] = []
    heard = verify("reference", "ci", only, heartbeat=lines.append)
    silent = verify("reference", "ci", only)
    assert heard.rows == silent.rows
    machine = [line for line in lines if line.startswith("EncoderCacheMachine: ")]
    assert machine and all(" programs so far (" in line for line in machine)
    counts = [int(line.split()[1]) for line in machine]
    assert counts == sorted(counts) and counts[-1] > 0
    assert all(" examples so far (" in line for line in lines if line.startswith("exp_"))

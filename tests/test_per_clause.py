"""Per-clause verdicts (issue 14, issue 19): a violation of one clause does not hide the
others. The failing clauses are set aside and the property run again until every clause
has its own verdict, each failure with its own counterexample and replay command."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

from harness.grading.grade import ItemStatus, grade
from harness.grading.rubric import load_rubric
from harness.report import render
from harness.runner import Report, Verdict, verify
from tests.conftest import once_across_workers

ROOT = Path(__file__).resolve().parents[1]
TWO_BUGS = "tests/fixtures/two_cache_bugs.py"
ECM = ("ECM-1", "ECM-2", "ECM-3", "ECM-4", "ECM-5", "ECM-6", "ECM-7", "ECM-8", "ECM-9")


@functools.cache
def two_bugs_report() -> Report:
    return once_across_workers(
        "two bugs", lambda: verify(TWO_BUGS, "ci", ["EncoderCacheMachine"])
    )


def test_two_bugs_fail_two_clauses_and_the_others_are_judged() -> None:
    report = two_bugs_report()
    verdicts = {row.clause: row.verdict for row in report.rows}
    assert verdicts == {
        c: Verdict.FAIL if c in ("ECM-5", "ECM-6") else Verdict.PASS for c in ECM
    }, render(report)
    failures = report.results["EncoderCacheMachine"].failures
    assert sorted(f.clause or "" for f in failures) == ["ECM-5", "ECM-6"]
    first, second = failures
    assert first.set_aside == () and second.set_aside == (first.clause,)
    text = render(report)
    assert f"--only EncoderCacheMachine --set-aside {first.clause}" in text
    assert "judged on the runs in which" in text


def test_the_set_aside_replay_reproduces_the_second_failure() -> None:
    first = two_bugs_report().results["EncoderCacheMachine"]
    hidden, shown = first.failures
    out = subprocess.run(
        [sys.executable, "-m", "properties", "verify", "--adapter", TWO_BUGS, "--profile",
         "ci", "--only", "EncoderCacheMachine", "--set-aside", hidden.clause or ""],
        cwd=ROOT, capture_output=True, text=True, check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    ).stdout
    assert f"message: {shown.message}" in out.split("-- failure 2")[0], out
    row = next(line for line in out.splitlines() if line.startswith(f"{hidden.clause} "))
    assert "blocked" in row  # a clause set aside is never judged, let alone passed


def test_a_set_aside_clause_is_blocked_even_where_the_run_passes() -> None:
    report = verify("reference", "ci", ["EncoderCacheMachine"], set_aside=["ECM-5"])
    verdicts = {row.clause: row.verdict for row in report.rows}
    assert verdicts["ECM-5"] is Verdict.BLOCKED and not report.ok
    assert all(v is Verdict.PASS for c, v in verdicts.items() if c != "ECM-5")
    assert "set aside: --set-aside ECM-5" in render(report)


def test_one_bug_costs_one_item() -> None:
    """The LRU bug costs the 10-point eviction item and nothing else: sharing by content
    and slot accounting keep their points (they were `blocked`, 23 points in all)."""
    items = ["Done 2: cache sharing by content", "Done 4: eviction",
             "Encoder cache: slot accounting and references"]
    report = grade("tests/fixtures/student_lru_bug.py", load_rubric(), "ci", only=items,
                   reproducers=False)
    status = {r.item.name: r.status for r in report.items}
    assert status == {
        items[0]: ItemStatus.PASSED, items[1]: ItemStatus.FAILED, items[2]: ItemStatus.PASSED
    }, status


def test_a_clause_is_judged_when_the_transitions_that_judge_it_were_reached() -> None:
    """A cache that evicts one entry too few breaks ECM-5 on every eviction that needs
    two entries, so the runs that remain rarely drain a freed hash: ECM-7 (judged by
    ``drain_freed``) stays blocked and says why, while the clauses whose transitions
    were reached — sharing, freeable, references — are judged and pass (SPEC.md
    "## Transitions": each transition names the clauses it judges)."""
    report = verify("adapters.zoo.ecm_evicts_one_short", "ci", ["EncoderCacheMachine"])
    verdicts = {row.clause: row.verdict for row in report.rows}
    assert verdicts["ECM-5"] is Verdict.FAIL, render(report)
    assert {verdicts[c] for c in ("ECM-2", "ECM-3", "ECM-6")} == {Verdict.PASS}, render(report)
    assert verdicts["ECM-7"] is Verdict.BLOCKED, render(report)
    because = report.results["EncoderCacheMachine"].blocked_because
    assert "drain_freed" in because and "judges ECM-7" in because, because


def test_the_set_aside_replay_gives_the_words_the_per_clause_run_gave() -> None:
    """Replayed with ``--set-aside ECM-5`` (what the report of the run above says to
    run), the run in which ECM-5 holds is VACUOUS as a whole (drain_freed is short), and
    its rows say what the per-clause rerun said of it: the clauses judged pass, ECM-7
    blocked with the same why; and its replay line is that same run."""
    entry = "adapters.zoo.ecm_evicts_one_short"
    per_clause = verify(entry, "ci", ["EncoderCacheMachine"])
    replayed = verify(entry, "ci", ["EncoderCacheMachine"], set_aside=["ECM-5"])
    before = {row.clause: row.verdict for row in per_clause.rows if row.clause != "ECM-5"}
    after = {row.clause: row.verdict for row in replayed.rows if row.clause != "ECM-5"}
    assert after == before, render(replayed)
    assert {row.clause: row.verdict for row in replayed.rows}["ECM-5"] is Verdict.BLOCKED
    because = replayed.results["EncoderCacheMachine"].blocked_because
    assert "set aside: --set-aside ECM-5" in because and "judges ECM-7" in because, because
    text = render(replayed)
    assert "--only EncoderCacheMachine --set-aside ECM-5" in text, text
    assert "judged on the runs in which ECM-5 held" in text, text

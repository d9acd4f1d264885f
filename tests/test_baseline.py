"""Saved verdicts and ``--baseline``: only the verdicts that differ are printed, each
classified as fixed, broke or changed (harness/baseline.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import harness.runner as runner_module
from harness import cli
from harness.baseline import (
    BaselineError,
    SavedRow,
    SavedVerdicts,
    any_broke,
    differences,
    load_verdicts,
    render_differences,
)
from properties.framework import Parts, PropertySpec, Runnable, check, stateless
from spec.clauses import Clause

GOOD = str(Path(__file__).resolve().parent / "fixtures" / "good_adapter.py")


def _deterministic(parts: Parts) -> Runnable:
    @given(st.binary(max_size=8))
    def test(data: bytes) -> None:
        hasher = parts.hasher()
        check(hasher.hash_item(data) == hasher.hash_item(data), "FAKE-1", "not deterministic")

    return stateless(test)


def _small(parts: Parts) -> Runnable:
    @given(st.integers())
    def test(x: int) -> None:
        check(x < 100, "FAKE-2", f"{x} is too large")

    return stateless(test)


@pytest.fixture(autouse=True)
def fake_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two fake properties on the fixture adapter's hasher: one passes, one fails."""
    registry = {
        "hash_det": PropertySpec("hash_det", ("FAKE-1",), ("hasher",), (), _deterministic,
                                 __name__),
        "small": PropertySpec("small", ("FAKE-2",), ("hasher",), (), _small, __name__),
    }
    clauses = {
        c: Clause(id=c, title=c, statement=c, symptom=c, upstream="", checked_by=())
        for c in ("FAKE-1", "FAKE-2")
    }
    monkeypatch.setattr(runner_module, "registered_properties", lambda: registry)
    monkeypatch.setattr(runner_module, "load_clauses", lambda: clauses)


def saved(*rows: tuple[str, str, str], adapter: str = "impl") -> SavedVerdicts:
    return SavedVerdicts(
        adapter=adapter,
        profile="ci",
        components={"hasher": adapter},
        rows=tuple(SavedRow(c, p, v, (f"{p} says {v}",)) for c, p, v in rows),
    )


def test_only_rows_whose_verdict_differs_are_reported_and_classified() -> None:
    before = saved(
        ("A-1", "p1", "pass"), ("A-2", "p2", "FAIL"), ("A-3", "p3", "FAIL"),
        ("A-4", "p4", "pass"), ("A-5", "p5", "FAIL"), ("A-6", "p6", "pass"),
        ("A-7", "p7", "blocked"), ("A-8", "p8", "FAIL"), ("A-9", "p9", "ERROR"),
        adapter="old",
    )
    after = saved(
        ("A-1", "p1", "pass"), ("A-2", "p2", "pass"), ("A-3", "p3", "blocked"),
        ("A-4", "p4", "ERROR"), ("A-5", "p5", "FAIL"), ("A-6", "p6", "not provided"),
        ("A-7", "p7", "FAIL"), ("A-8", "p8", "ERROR"), ("A-9", "p9", "FAIL"),
        adapter="new",
    )
    found = {(d.clause, d.kind, d.before, d.after) for d in differences(before, after)}
    assert found == {
        ("A-2", "fixed", "FAIL", "pass"),
        ("A-3", "changed", "FAIL", "blocked"),
        ("A-4", "broke", "pass", "ERROR"),
        ("A-6", "changed", "pass", "not provided"),
        # a regression that used to hide behind another clause's failure (issue 14)
        ("A-7", "broke", "blocked", "FAIL"),
        # failing differently is a new FAIL or ERROR, whatever the baseline had
        ("A-8", "broke", "FAIL", "ERROR"),
        ("A-9", "broke", "ERROR", "FAIL"),
    }
    assert any_broke(before, after)
    text = render_differences(before, after)
    assert "A-1" not in text and "A-5" not in text  # same verdicts are not printed
    assert "p4 says ERROR" in text  # a new failure carries its message
    assert "7 of 9 clause rows differ: 4 broke, 1 fixed, 2 changed" in text


def test_rows_present_on_one_side_only_are_differences() -> None:
    before = saved(("A-1", "p1", "pass"), ("A-2", "gone", "FAIL"))
    after = saved(("A-1", "p1", "pass"), ("A-3", "new", "FAIL"))
    found = {(d.clause, d.before, d.after, d.kind) for d in differences(before, after)}
    # a new row that fails broke; a row that is gone changed
    assert found == {("A-3", "—", "FAIL", "broke"), ("A-2", "FAIL", "—", "changed")}


def test_equal_runs_have_no_difference() -> None:
    run = saved(("A-1", "p1", "pass"), ("A-2", "p2", "FAIL"))
    assert differences(run, run) == []
    assert "no verdict differs (2 clause rows compared)" in render_differences(run, run)


def test_save_report_then_baseline_round_trip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "run.json"
    assert cli.main(["verify", "--adapter", GOOD, "--only", "hash_det", "--save-report",
                     str(report)]) == 0
    saved_run = load_verdicts(report)
    assert [(r.clause, r.verdict) for r in saved_run.rows] == [("FAKE-1", "pass")]
    capsys.readouterr()
    assert cli.main(["verify", "--adapter", GOOD, "--only", "hash_det", "--baseline",
                     str(report)]) == 0
    assert "no verdict differs" in capsys.readouterr().out

    # A baseline in which the row failed: the run under test fixed it (exit 0).
    data = json.loads(report.read_text())
    data["rows"][0]["verdict"] = "FAIL"
    report.write_text(json.dumps(data))
    assert cli.main(["verify", "--adapter", GOOD, "--only", "hash_det", "--baseline",
                     str(report)]) == 0
    out = capsys.readouterr().out
    assert "FAKE-1" in out and "fixed" in out


def test_a_verdict_that_broke_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "run.json"
    assert cli.main(["verify", "--adapter", GOOD, "--only", "small", "--save-report",
                     str(report)]) == 1
    data = json.loads(report.read_text())
    assert any(row["verdict"] == "FAIL" for row in data["rows"])
    for row in data["rows"]:
        row["verdict"] = "pass"
    report.write_text(json.dumps(data))
    capsys.readouterr()
    assert cli.main(["verify", "--adapter", GOOD, "--only", "small", "--baseline",
                     str(report)]) == 1
    assert "broke" in capsys.readouterr().out


def test_a_baseline_that_is_nothing_known_is_a_usage_error(tmp_path: Path) -> None:
    assert cli.main(["verify", "--adapter", GOOD, "--baseline", str(tmp_path / "nope")]) == 2
    not_a_report = tmp_path / "x.json"
    not_a_report.write_text("{}")
    with pytest.raises(BaselineError):
        load_verdicts(not_a_report)

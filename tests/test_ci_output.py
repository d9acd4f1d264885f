"""What ``verify`` gives a CI system: JUnit XML, GitHub Actions annotations and step
summary, and a saved report with every counterexample (issue 21; harness/ci_output.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from harness.ci_output import MAX_ANNOTATIONS, github_annotations, junit_xml, step_summary
from harness.runner import Verdict, verify
from tests.conftest import FIXTURES, ROOT

JUNIT_SCHEMA = xmlschema.XMLSchema(str(FIXTURES / "junit.xsd"))
BUGGY = str(ROOT / "adapters" / "zoo" / "spl_broadcast_single_row.py")


def _verify(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "properties", "verify", "--adapter", BUGGY, "--profile", "ci",
         "--only", "SPL-3", "SPL-4", *args],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # the zoo entry breaks SPL-4
    return done.stdout


def test_junit_xml_has_one_case_per_row_and_the_failures_explanation(tmp_path: Path) -> None:
    _verify(tmp_path, "--junit-xml", "out/junit.xml")
    text = (tmp_path / "out" / "junit.xml").read_text(encoding="utf-8")
    JUNIT_SCHEMA.validate(text)
    (suite,) = ET.fromstring(text).iter("testsuite")
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    assert ("spl_no_broadcast", "SPL-4") in cases
    failure = cases["spl_no_broadcast", "SPL-4"].find("failure")
    assert failure is not None and failure.text is not None
    assert "SPL-4" in failure.text and "counterexample:" in failure.text
    assert "python -m properties verify --adapter" in failure.text
    assert int(suite.get("failures") or 0) >= 1


def test_github_actions_annotations_and_step_summary(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    stdout = _verify(tmp_path, env={"GITHUB_ACTIONS": "true",
                                    "GITHUB_STEP_SUMMARY": str(summary)})
    errors = [line for line in stdout.splitlines() if line.startswith("::error ")]
    assert any(e.startswith("::error title=SPL-4 FAIL") for e in errors), errors
    assert all("%0A" in e for e in errors)  # one workflow command per row, one line each
    text = summary.read_text(encoding="utf-8")
    assert "| SPL-4 | `spl_no_broadcast` | FAIL |" in text and "#### SPL-4" in text


def test_saved_report_carries_each_failures_counterexample_and_replay(tmp_path: Path) -> None:
    _verify(tmp_path, "--save-report", "saved.json")
    rows = json.loads((tmp_path / "saved.json").read_text(encoding="utf-8"))["rows"]
    failing = [row for row in rows if row["verdict"] == "FAIL"]
    spl4 = next(row for row in failing if row["clause"] == "SPL-4")
    (failure,) = spl4["failures"]
    assert failure["clause"] == "SPL-4" and failure["counterexample"]
    assert failure["replay"].endswith("--only spl_no_broadcast")
    assert all(row["failures"] == [] for row in rows if row["verdict"] == "pass")


# --- sized for what CI shows (issue 33, item 7) ----------------------------------------


def test_a_propertys_time_is_shared_among_its_rows() -> None:
    """A machine runs once for all its clauses: JUnit used to repeat its whole time on each
    row (the cases summed to 1,094 s for a 103 s suite)."""
    report = verify("reference", "ci", only=["ItemCacheMachine"])
    (suite,) = ET.fromstring(junit_xml(report)).iter("testsuite")
    times = [float(case.get("time") or 0) for case in suite.iter("testcase")]
    seconds = report.results["ItemCacheMachine"].seconds
    assert len(times) == 4 and seconds > 0  # FIC-1..4
    assert abs(sum(times) - seconds) < 0.01 and max(times) < seconds


def test_a_skipped_row_says_why_in_words() -> None:
    report = verify("adapters/template", "ci", only=["SPL-4"])
    (suite,) = ET.fromstring(junit_xml(report)).iter("testsuite")
    skipped = [s.get("message") or "" for s in suite.iter("skipped")]
    assert skipped and all("does not provide splice" in m for m in skipped), skipped
    assert not any(m.endswith(": reference") for m in skipped)


def test_annotations_are_capped_short_and_on_the_adapters_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    adapter = "adapters/zoo/spl_broadcast_single_row.py"
    report = verify(adapter, "ci", only=["SPL-4"])
    (failing,) = [row for row in report.rows if row.verdict is Verdict.FAIL]
    many = dataclasses.replace(report, rows=(failing,) * (MAX_ANNOTATIONS + 2))
    lines = github_annotations(many)
    errors = [line for line in lines if line.startswith("::error ")]
    assert len(errors) == MAX_ANNOTATIONS and len(lines) == MAX_ANNOTATIONS + 1
    assert lines[-1].startswith("::notice ") and "2 more failing rows" in lines[-1]
    assert all(e.startswith(f"::error file={adapter},title=SPL-4 FAIL") for e in errors)
    assert all("replay: " in e and "counterexample" not in e for e in errors), errors[0]
    outside = github_annotations(dataclasses.replace(report, adapter_ref="/elsewhere/a.py"))
    assert outside and not any("file=" in line for line in outside)


def test_the_step_summary_lists_the_failing_rows_and_counts_the_rest() -> None:
    report = verify("adapters/zoo/spl_broadcast_single_row.py", "ci", only=["SPL-4", "SPL-2"])
    text = step_summary(report)
    assert "| SPL-4 | `spl_no_broadcast` | FAIL |" in text
    assert "| SPL-2 |" not in text and "The other rows: 1 pass." in text, text
    template = step_summary(verify("adapters/template", "ci", only=["SPL-3", "SPL-4"]))
    assert "| clause |" not in template and "The other rows: 2 not provided." in template


def test_a_bad_adapter_still_writes_the_junit_file_and_an_annotation(tmp_path: Path) -> None:
    """issue 33, item 8: a run that judges nothing tells the CI why, in the JUnit file
    (one error case, ``adapter``) and as an annotation, not only on stderr."""
    (tmp_path / "bad.py").write_text("x = 1\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "properties", "verify", "--adapter", "bad.py",
         "--junit-xml", "out/junit.xml"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT), "GITHUB_ACTIONS": "true"},
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    text = (tmp_path / "out" / "junit.xml").read_text(encoding="utf-8")
    JUNIT_SCHEMA.validate(text)
    (suite,) = ET.fromstring(text).iter("testsuite")
    (case,) = suite.iter("testcase")
    error = case.find("error")
    assert case.get("name") == "adapter" and error is not None and error.text is not None
    assert "has no attribute ADAPTER" in error.text and suite.get("errors") == "1"
    (annotation,) = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert "has no attribute ADAPTER" in annotation

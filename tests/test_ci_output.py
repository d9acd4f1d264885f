"""What ``verify`` gives a CI system: JUnit XML, GitHub Actions annotations and step
summary, and a saved report with every counterexample (issue 21; harness/ci_output.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import xmlschema

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

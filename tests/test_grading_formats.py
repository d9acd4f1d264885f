"""Every report format, for every kind of report (full marks, a failure with its
reproducer, an unfilled template, an adapter that does not load): JUnit XML valid against
the Apache Ant JUnit schema, Gradescope results.json valid against a JSON Schema of
Gradescope's format, JSON complete, text and Markdown readable."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest
import xmlschema

from harness.grading.formats import render
from harness.grading.formats.junit import render_junit
from harness.grading.grade import GradeReport, ItemStatus, grade
from harness.grading.rubric import load_rubric
from tests.conftest import FIXTURES, ROOT

RUBRIC = load_rubric()
JUNIT_SCHEMA = xmlschema.XMLSchema(str(FIXTURES / "junit.xsd"))
GRADESCOPE_SCHEMA = json.loads((FIXTURES / "gradescope.schema.json").read_text())


@pytest.fixture(scope="module")
def reports() -> dict[str, GradeReport]:
    return {
        "full marks": grade("reference", RUBRIC, "ci", only=["EXP-6", "HASH-1", "SPL-3"]),
        "failure": grade("adapters/zoo/hash_by_length.py", RUBRIC, "ci", seed=3),
        "template": grade("adapters/template", RUBRIC, "ci"),
        "not loaded": grade(str(FIXTURES / "many_problems.py"), RUBRIC, "ci"),
    }


KINDS = ("full marks", "failure", "template", "not loaded")


@pytest.mark.parametrize("kind", KINDS)
def test_junit_is_valid_against_the_junit_schema(
    reports: dict[str, GradeReport], kind: str
) -> None:
    xml = render(reports[kind], "junit")
    JUNIT_SCHEMA.validate(xml)  # raises with the offending path on any violation
    assert xml.count("<testcase ") == len(reports[kind].items)


@pytest.mark.parametrize("kind", KINDS)
def test_gradescope_results_are_valid_against_the_schema(
    reports: dict[str, GradeReport], kind: str
) -> None:
    results = json.loads(render(reports[kind], "gradescope"))
    jsonschema.Draft202012Validator(GRADESCOPE_SCHEMA).validate(results)
    report = reports[kind]
    assert results["score"] == report.score
    assert sum(t["max_score"] for t in results["tests"]) == report.max_score
    assert {t["visibility"] for t in results["tests"]} <= {"visible", "hidden",
                                                            "after_due_date", "after_published"}


def test_the_schemas_refuse_what_they_should() -> None:
    """The validators are not vacuous: a broken report fails them."""
    validator = jsonschema.Draft202012Validator(GRADESCOPE_SCHEMA)
    assert not validator.is_valid({"tests": [{"name": "x"}]}), "no score anywhere"
    assert not validator.is_valid({"score": 1, "tests": [{"score": 1, "status": "ok"}]})
    assert not validator.is_valid({"score": 1, "visibility": "public"})
    assert not validator.is_valid({"score": 1, "tset": []}), "typos are refused"
    assert not JUNIT_SCHEMA.is_valid('<testsuites><testsuite name="x"/></testsuites>')


def test_a_failed_item_carries_everything_a_student_needs(
    reports: dict[str, GradeReport],
) -> None:
    results = json.loads(render(reports["failure"], "gradescope"))
    (failed,) = [t for t in results["tests"] if t.get("status") == "failed" and t["score"] == 0
                 and "HASH-2" in t["tags"]]
    output = failed["output"]
    for expected in (
        "HASH-2 — different bytes, different hash",  # the clause
        "**Minimal counterexample:**",
        "1. two images of the same size, different bytes",  # numbered, in spec vocabulary
        "the specification expects: <value #2>",  # expected vs actual
        "your implementation gave:  <value #1>",
        "python -m properties grade adapters/zoo/hash_by_length.py --profile ci --seed 3",
        # the whole script, folded away under a click (Markdown: output_format md)
        "<details><summary>Reproducer <code>repro_hash_same_length_different_bytes_hash_2.py",
        "ADAPTER = load_adapter(",
    ):
        assert expected in output, f"{expected!r} missing from:\n{output}"
    assert failed["output_format"] == results["test_output_format"] == "md"
    assert "Traceback (most recent call last)" not in output


def test_an_optional_item_not_provided_is_no_red_failure_on_gradescope(
    reports: dict[str, GradeReport],
) -> None:
    results = json.loads(render(reports["template"], "gradescope"))
    free = [t for t in results["tests"] if t["max_score"] == 0]
    scored = [t for t in results["tests"] if t["max_score"] > 0]
    assert free and scored
    assert all("status" not in t and t["output"].startswith("**not provided**") for t in free)
    assert all(t["status"] == "failed" for t in scored)  # points lost: failed


def test_an_item_credited_through_a_stand_in_says_so(tmp_path: Path) -> None:
    """A build of the scheduling hook alone is graded with the reference's cache manager
    handed to it: the item's points are for the hook, and its output says who stood in."""
    hook_only = tmp_path / "hook_only.py"
    hook_only.write_text(
        "from reference.adapter import ADAPTER as REFERENCE\n"
        "from spec.adapter import Adapter\n"
        "ADAPTER = Adapter(name='hook-only', scheduling_hook=REFERENCE.scheduling_hook)\n",
        encoding="utf-8",
    )
    report = grade(str(hook_only), RUBRIC, "ci", only=["SCH-9"])
    (item,) = [r for r in report.items if "SCH-9" in r.item.clauses]
    assert item.status is ItemStatus.PASSED
    assert item.summary.endswith(
        "; the reference stood in for encoder_cache_manager, which the adapter does not "
        "provide: the points are for its scheduling_hook"
    )


def test_json_has_every_fact(reports: dict[str, GradeReport]) -> None:
    data = json.loads(render(reports["failure"], "json"))
    assert data["score"] == reports["failure"].score and data["max_score"] == 100
    assert data["seed"] == 3 and data["profile"] == "ci"
    assert data["components"]["hasher"] == "zoo.hash_by_length"
    (item,) = [i for i in data["items"] if i["name"] == "Done 2: cache sharing by content"]
    assert item["status"] == "failed" and item["clauses"][0] == "HASH-1"
    (failure,) = [f for f in item["failures"] if f["clause"] == "HASH-2"]
    assert failure["reproducer"]["reproduces"] is True
    assert failure["reproducer"]["script"].startswith("#!/usr/bin/env python3")
    loaded = json.loads(render(reports["not loaded"], "json"))
    assert loaded["load_error"].startswith("cannot load adapter")


def test_text_and_markdown_read_well(reports: dict[str, GradeReport]) -> None:
    text = render(reports["failure"], "text")
    assert text.startswith("mmspec grade: ")
    assert "Done 2: cache sharing by content" in text and "FAILED" in text
    assert "reproducer script repro_" in text
    markdown = render(reports["failure"], "markdown")
    assert markdown.startswith("# mmspec grade: ")
    assert "| # | item | points | status | clauses |" in markdown
    assert "<details><summary>Reproducer" in markdown and "```python" in markdown
    # the components: one nested line per implementation, each component named once
    # (issue 33, item 8: they were one line of eleven)
    header = markdown.split("\n- **components:**\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert header and all(line.startswith("  - ") for line in header), header
    named = [c for line in header for c in re.findall(r"`([a-z_]+)`", line.split(": ", 1)[1])]
    assert sorted(named) == sorted(reports["failure"].provenance), header
    assert len(header) == len({*reports["failure"].provenance.values()}), header
    # the replay line names the adapter as it was given, never the grader's own folders
    # (issue 33, item 8: the report goes to a student, whose folders are not the grader's)
    replays = [line for line in markdown.splitlines() if line.startswith("python -m properties")]
    assert replays and all("adapters/zoo/hash_by_length.py" in line for line in replays)
    assert not [line for line in replays if str(ROOT) in line], replays
    template = render(reports["template"], "text")
    assert template.count("not provided") >= len(RUBRIC.items)
    not_loaded = render(reports["not loaded"], "text")
    assert "The adapter could not be loaded" in not_loaded


def test_junit_maps_statuses_to_failure_error_and_skipped(
    reports: dict[str, GradeReport],
) -> None:
    report = reports["failure"]
    fixed = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    xml = render_junit(report, now=fixed)
    assert 'timestamp="2026-01-02T03:04:05"' in xml and 'hostname="localhost"' in xml
    failed = sum(1 for r in report.items if r.status is ItemStatus.FAILED)
    skipped = sum(1 for r in report.items if r.status is not ItemStatus.PASSED) - failed
    assert f'failures="{failed}"' in xml and f'skipped="{skipped}"' in xml
    assert xml.count("<failure ") == failed


def test_junit_timestamp_follows_source_date_epoch(
    reports: dict[str, GradeReport], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    assert 'timestamp="1970-01-01T00:00:00"' in render(reports["full marks"], "junit")

"""Gradescope's ``results.json``: one test per rubric item.

The format (Gradescope's autograder specification, "Output format"): top-level
``score``, ``execution_time`` (seconds), ``output``, ``tests`` (each with ``name``,
``number``, ``score``, ``max_score``, ``status`` "passed"/"failed", ``output``,
``visibility``, ``tags``), and ``stdout_visibility``. Output is plain text (shown in a
``<pre>``), and a failing item's output carries its reproducer script, since a student
cannot fetch files from the autograder. A hidden seed appears nowhere in the file.
tests/fixtures/gradescope.schema.json is the JSON Schema it is checked against.
"""

from __future__ import annotations

import json
from typing import Any

from harness.grading.formats.common import (
    header_lines,
    item_lines,
    load_error_lines,
    score_line,
)
from harness.grading.grade import GradeReport, ItemResult, ItemStatus


def results_dict(report: GradeReport) -> dict[str, Any]:
    output = [f"score: {score_line(report)}", *header_lines(report)]
    errors = load_error_lines(report)
    if errors:
        output += ["", *errors]
    if report.warnings:
        output += ["", "warnings:", *(f"  - {w}" for w in report.warnings)]
    output += [
        "",
        "Each test below is one rubric item. A failed item shows the clause, the minimal "
        "counterexample, what was expected and what your implementation gave, and a "
        "reproducer script to run on your machine (docs/grading.md).",
    ]
    return {
        "score": report.score,
        "execution_time": int(round(report.seconds)),
        "output": "\n".join(output),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "stdout_visibility": "hidden",
        "tests": [_test(result) for result in report.items],
        "extra_data": {
            "adapter": report.adapter_ref,
            "rubric": report.rubric.source,
            "profile": report.profile,
            "seed_hidden": report.seed_hidden,
        },
    }


def render_gradescope(report: GradeReport) -> str:
    return json.dumps(results_dict(report), indent=2, ensure_ascii=False) + "\n"


def _test(result: ItemResult) -> dict[str, Any]:
    item = result.item
    return {
        "name": item.name,
        "number": str(item.number),
        "score": result.score,
        "max_score": item.points,
        "status": "passed" if result.status is ItemStatus.PASSED else "failed",
        "output": "\n".join(item_lines(result, inline_scripts=True)),
        "visibility": item.visibility,
        "tags": list(item.clauses),
    }

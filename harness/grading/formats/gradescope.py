"""Gradescope's ``results.json``: one test per rubric item.

The format (Gradescope's autograder specification, "Output format"): top-level
``score``, ``execution_time`` (seconds), ``output``, ``tests`` (each with ``name``,
``number``, ``score``, ``max_score``, ``status`` "passed"/"failed", ``output``,
``visibility``, ``tags``), and ``stdout_visibility``. The submission's output is plain
text (shown in a ``<pre>``); each test's is Markdown (``output_format: md``, the Markdown
report's section of the item), so that a failing item's reproducer script — carried in
full, since a student cannot fetch files from the autograder — is folded away under a
click instead of being hundreds of lines inline. An item that did not run and is worth
no points (an optional capability the build lacks) has no ``status``: Gradescope shows
it by its score (0/0), not as a red failure. A hidden seed appears nowhere in the file.
tests/fixtures/gradescope.schema.json is the JSON Schema it is checked against.
"""

from __future__ import annotations

import json
from typing import Any

from harness.grading.formats.common import (
    STATUS_WORDS,
    header_lines,
    load_error_lines,
    score_line,
)
from harness.grading.formats.markdown import item_body
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
        "test_output_format": "md",
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


#: Statuses of an item that did not run (nothing was judged).
_DID_NOT_RUN = (ItemStatus.NOT_PROVIDED, ItemStatus.NOT_ATTEMPTED, ItemStatus.NEEDS_REFERENCE)


def _test(result: ItemResult) -> dict[str, Any]:
    item = result.item
    summary, *body = item_body(result)
    test: dict[str, Any] = {
        "name": item.name,
        "number": str(item.number),
        "score": result.score,
        "max_score": item.points,
        "status": "passed" if result.status is ItemStatus.PASSED else "failed",
        "output": "\n".join([f"**{STATUS_WORDS[result.status]}**: {summary}", *body]),
        "output_format": "md",
        "visibility": item.visibility,
        "tags": list(item.clauses),
    }
    if result.status in _DID_NOT_RUN and item.points == 0:
        del test["status"]  # nothing lost, nothing judged: not a red failure
    return test

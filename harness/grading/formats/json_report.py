"""JSON: every fact of the report, structured (keys sorted, two-space indent).

``execution_time`` and each item's ``seconds`` are the only timings; everything else is a
function of the adapter, the rubric, the profile and the seed.
"""

from __future__ import annotations

import json
from typing import Any

from harness.grading.grade import FailureDetail, GradeReport, ItemResult
from harness.report import identity_line

#: Bumped when a field changes meaning or disappears.
SCHEMA_VERSION = 1


def report_dict(report: GradeReport) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "judged_by": identity_line(),
        "adapter": {"ref": report.adapter_ref, "name": report.adapter_name},
        "rubric": {"title": report.rubric.title, "source": report.rubric.source},
        "profile": report.profile,
        "seed": None if report.seed is None or report.seed_hidden else report.seed,
        "seed_hidden": report.seed_hidden,
        "isolation": report.isolation,
        "components": dict(report.provenance),
        "load_error": report.load_error,
        "score": report.score,
        "max_score": report.max_score,
        "counts": {status.value: n for status, n in report.counts().items()},
        "items": [_item(result) for result in report.items],
        "warnings": list(report.warnings),
        "execution_time": round(report.seconds, 3),
    }


def render_json(report: GradeReport) -> str:
    return json.dumps(report_dict(report), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _item(result: ItemResult) -> dict[str, Any]:
    item = result.item
    return {
        "number": item.number,
        "name": item.name,
        "points": item.points,
        "score": result.score,
        "status": result.status.value,
        "visibility": item.visibility,
        "clauses": list(item.clauses),
        "capabilities": sorted(item.capabilities),
        "description": item.description,
        "summary": result.summary,
        "properties": list(result.properties),
        "examples": result.examples,
        "failures": [_failure(f) for f in result.failures],
        "seconds": round(result.seconds, 3),
    }


def _failure(failure: FailureDetail) -> dict[str, Any]:
    reproducer = failure.reproducer
    verification = reproducer.verification if reproducer else None
    return {
        "kind": failure.kind,
        "property": failure.property_name,
        "clause": failure.clause,
        "clause_title": failure.clause_title,
        "statement": failure.statement,
        "symptom": failure.symptom,
        "message": failure.message,
        "steps": list(failure.steps),
        "replay_command": failure.replay_command,
        "reproducer": None
        if reproducer is None
        else {
            "filename": reproducer.filename,
            "script": reproducer.script,
            "checked_calls": reproducer.steps,
            "reproduces": None if verification is None else verification.reproduces,
            "ran_to_end": None if verification is None else verification.completed,
            "failed_step": None if verification is None else verification.step,
            "detail": None if verification is None else verification.detail,
        },
        "reproducer_note": failure.reproducer_note,
    }

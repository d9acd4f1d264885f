"""Terminal text: a table of items, then a section per item that did not pass."""

from __future__ import annotations

from harness.grading.formats.common import (
    STATUS_WORDS,
    header_lines,
    item_lines,
    load_error_lines,
    points,
    score_line,
)
from harness.grading.grade import GradeReport, ItemStatus


def render_text(report: GradeReport, inline_scripts: bool = False) -> str:
    lines = [f"mmspec grade: {points(report.score)}/{points(report.max_score)}"]
    lines += header_lines(report)
    errors = load_error_lines(report)
    if errors:
        lines += ["", *errors]
    lines += ["", *_table(report)]
    for result in report.items:
        if result.status not in (ItemStatus.FAILED, ItemStatus.BLOCKED):
            continue
        title = f"{result.item.number}. {result.item.name}"
        score = f"{points(result.score)}/{points(result.item.points)}"
        lines += ["", f"== {title}: {STATUS_WORDS[result.status]} ({score}) =="]
        lines += item_lines(result, inline_scripts)
    for status in (ItemStatus.NOT_PROVIDED, ItemStatus.NOT_ATTEMPTED, ItemStatus.NEEDS_REFERENCE):
        ungraded = [r for r in report.items if r.status is status]
        if not ungraded:
            continue
        if status is ItemStatus.NEEDS_REFERENCE:  # the student kit's: not judged there
            lines += ["", f"== {status.value}: graded on the autograder (0 points here) =="]
        else:
            lines += ["", f"== {status.value} (0 points) =="]
        lines += [f"{r.item.number}. {r.item.name}: {r.summary}" for r in ungraded]
    if report.warnings:
        lines += ["", "warnings:", *(f"  - {w}" for w in report.warnings)]
    lines += ["", f"score: {score_line(report)} in {report.seconds:.1f} s"]
    return "\n".join(lines) + "\n"


def _table(report: GradeReport) -> list[str]:
    rows = [
        (
            str(r.item.number),
            r.item.name,
            f"{points(r.score)}/{points(r.item.points)}",
            STATUS_WORDS[r.status],
        )
        for r in report.items
    ]
    headers = ("#", "item", "points", "status")
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]

    def line(cells: tuple[str, ...]) -> str:
        padded = [
            cell.rjust(width) if i in (0, 2) else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(padded).rstrip()

    return [line(headers), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)]

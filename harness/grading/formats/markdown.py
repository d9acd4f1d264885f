"""Markdown (GitHub-flavoured): a score table, then a section per item that did not pass,
with the reproducer script folded in a ``<details>`` block."""

from __future__ import annotations

import html

from harness.grading.formats.common import (
    STATUS_WORDS,
    load_error_lines,
    owner_text,
    plural,
    points,
    raised_by_whom,
    reproducer_outcome,
    run_line,
    score_line,
)
from harness.grading.grade import FailureDetail, GradeReport, ItemResult, ItemStatus


def render_markdown(report: GradeReport) -> str:
    lines = [
        f"# mmspec grade: {points(report.score)}/{points(report.max_score)}",
        "",
        f"- **adapter:** {_code(report.adapter_name)} ({_code(report.adapter_ref)})",
        f"- **rubric:** {_cell(report.rubric.title)} ({_code(report.rubric.source)})",
        f"- **profile:** {_code(report.profile)}; **seed:** {report.shown_seed}",
        f"- **isolation:** {_cell(report.isolation)}",
        f"- **score:** {score_line(report)}",
    ]
    if report.provenance:
        lines += ["- **components:**", *_components(report)]
    errors = load_error_lines(report)
    if errors:
        lines += ["", "```text", *errors, "```"]
    lines += ["", "| # | item | points | status | clauses |", "|---:|---|---:|---|---|"]
    for result in report.items:
        item = result.item
        lines.append(
            f"| {item.number} | {_cell(item.name)} | {points(result.score)}/{points(item.points)}"
            f" | {STATUS_WORDS[result.status]} | {', '.join(item.clauses)} |"
        )
    for result in report.items:
        if result.status is not ItemStatus.PASSED:
            lines += ["", *_section(result)]
    if report.warnings:
        lines += ["", "## Warnings", "", *(f"- {_cell(w)}" for w in report.warnings)]
    lines += ["", f"_Graded in {report.seconds:.1f} s._"]
    return "\n".join(lines) + "\n"


def _components(report: GradeReport) -> list[str]:
    """One nested line per implementation, naming the components it stood behind (one
    line of eleven components and their owners did not read; issue 33, item 8)."""
    by_owner: dict[str, list[str]] = {}
    for component, owner in report.provenance.items():
        by_owner.setdefault(owner_text(report, owner), []).append(component)
    return [
        f"  - {_cell(owner)}: {', '.join(_code(c) for c in components)}"
        for owner, components in by_owner.items()
    ]


def _section(result: ItemResult) -> list[str]:
    item = result.item
    score = f"{points(result.score)}/{points(item.points)}"
    return [
        f"## {item.number}. {_cell(item.name)} — {STATUS_WORDS[result.status]} ({score})",
        "",
        *item_body(result),
    ]


def item_body(result: ItemResult) -> list[str]:
    """An item's section below its heading: why it has its status, what it grades, and
    each failure (the reproducer folded away: a page of code under a click). Also each
    Gradescope test's output (formats/gradescope.py)."""
    lines = [_cell(result.summary)]
    if result.item.description:
        lines += ["", f"_What it grades:_ {_cell(result.item.description)}"]
    for failure in result.failures:
        lines += ["", *_failure(failure)]
    return lines


def _failure(failure: FailureDetail) -> list[str]:
    if failure.clause is not None:
        lines = [
            f"### {failure.clause} — {_cell(failure.clause_title)}",
            "",
            f"> {_cell(failure.statement)}",
            ">",
            f"> _Why it matters:_ {_cell(failure.symptom)}",
            "",
            f"**Violation** (found by `{failure.property_name}`): {_cell(failure.message)}",
        ]
    else:
        lines = [
            f"### Error under `{failure.property_name}`",
            "",
            f"**{raised_by_whom(failure, 'error').capitalize()}:** {_cell(failure.message)}",
        ]
    if failure.steps:
        lines += ["", "**Minimal counterexample:**", "", "```text", *failure.steps, "```"]
    reproducer = failure.reproducer
    verification = reproducer.verification if reproducer else None
    if verification is not None and verification.reproduces:
        detail = verification.detail.splitlines()
        lines += ["", "**Expected vs actual:**", "", "```text", *detail, "```"]
    lines += ["", "**Replay:**", "", "```sh", failure.replay_command, "```"]
    if reproducer is None:
        lines += ["", f"_No reproducer script: {_cell(failure.reproducer_note)}._"]
        return lines
    lines += [
        "",
        f"<details><summary>Reproducer <code>{reproducer.filename}</code> "
        f"({plural(reproducer.steps, 'checked call')}; "
        f"{html.escape(reproducer_outcome(verification))}): save it, then run "
        f"<code>{html.escape(run_line(reproducer.filename))}</code></summary>",
        "",
        "```python",
        *reproducer.script.rstrip("\n").splitlines(),
        "```",
        "",
        "</details>",
    ]
    return lines


def _cell(text: str) -> str:
    """Text safe inside a table cell or a paragraph."""
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text.replace('`', '')}`"

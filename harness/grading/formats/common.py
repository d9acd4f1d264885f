"""What every format says about an item, as plain text lines.

The terminal text, JUnit and Gradescope outputs show the same per-item text; Markdown
and JSON structure the same facts. Nothing here depends on timings, so two runs with the
same adapter, profile and seed give the same text.
"""

from __future__ import annotations

import re

from harness.grading.grade import FailureDetail, GradeReport, ItemResult, ItemStatus
from harness.grading.reproducer import Verification
from harness.loader import NEEDS_REFERENCE
from harness.names import HAS_REFERENCE, INSTALLED
from harness.report import identity_line

#: How the item's score reads.
STATUS_WORDS = {
    ItemStatus.PASSED: "passed",
    ItemStatus.FAILED: "FAILED",
    ItemStatus.BLOCKED: "blocked",
    ItemStatus.NOT_PROVIDED: "not provided",
    ItemStatus.NOT_ATTEMPTED: "not attempted",
    ItemStatus.NEEDS_REFERENCE: "needs the reference",
}


def points(value: float) -> str:
    """``10`` rather than ``10.0``; ``2.5`` stays."""
    return f"{value:g}"


def score_line(report: GradeReport) -> str:
    counts = ", ".join(f"{n} {status.value}" for status, n in report.counts().items())
    return f"{points(report.score)}/{points(report.max_score)} ({counts})"


def item_lines(result: ItemResult, inline_scripts: bool) -> list[str]:
    """The item's output: its clauses and status, then each failure in full."""
    item = result.item
    lines = [f"{STATUS_WORDS[result.status]}: {result.summary}"]
    if result.status in (
        ItemStatus.NOT_PROVIDED, ItemStatus.NOT_ATTEMPTED, ItemStatus.NEEDS_REFERENCE
    ):
        return lines  # nothing ran: the reason is all there is to say
    if item.description:
        lines.append(f"what it grades: {item.description}")
    lines.append(f"clauses: {', '.join(item.clauses)}")
    for number, failure in enumerate(result.failures, 1):
        lines.append("")
        if len(result.failures) > 1:
            lines.append(f"--- failure {number} of {len(result.failures)} ---")
        lines += failure_lines(failure, inline_scripts)
    return lines


def failure_lines(failure: FailureDetail, inline_scripts: bool) -> list[str]:
    lines: list[str] = []
    if failure.clause is not None:
        lines.append(f"{failure.clause} — {failure.clause_title}")
        lines.append(f"  statement: {failure.statement}")
        lines.append(f"  why it matters: {failure.symptom}")
        lines.append(f"violation found by {failure.property_name}:")
    else:
        lines.append(f"{raised_by_whom(failure, 'an error')} under {failure.property_name}:")
    lines.append(f"  {failure.message}")
    if failure.steps:
        count = _count(failure.steps)
        lines.append(
            f"minimal counterexample ({plural(count, 'step')}):" if count
            else "minimal counterexample (the failing example, as Hypothesis wrote it):"
        )
        lines += [f"  {step}" for step in failure.steps]
    reproducer = failure.reproducer
    verification = reproducer.verification if reproducer else None
    if verification is not None and verification.reproduces:
        lines.append(
            "expected vs actual (the reproducer's first call that disagrees; its \"step N\" "
            "numbers the script's calls, not the counterexample's steps):"
        )
        lines += [f"  {line.strip()}" for line in verification.detail.splitlines()]
    lines.append("replay the property:")
    lines.append(f"  {failure.replay_command}")
    if reproducer is None:
        lines.append(f"no reproducer script: {failure.reproducer_note}")
        return lines
    lines.append(
        f"reproducer script {reproducer.filename} ({plural(reproducer.steps, 'checked call')}; "
        f"{reproducer_outcome(verification)}); run it with: {run_line(reproducer.filename)}"
    )
    if inline_scripts:
        lines.append(f"----- {reproducer.filename} -----")
        lines += reproducer.script.rstrip("\n").splitlines()
        lines.append(f"----- end of {reproducer.filename} -----")
    return lines


def raised_by_whom(failure: FailureDetail, what: str) -> str:
    """"your implementation raised ``what``", unless the reference standing in for a
    component the adapter lacks raised it (then just ``what``: the message says who)."""
    ours = failure.message.startswith("implementation raised")
    return f"your implementation raised {what}" if ours else what


def reproducer_outcome(verification: Verification | None) -> str:
    """What running the reproducer against the graded adapter showed, in a few words."""
    if verification is None:
        return "not run when graded"
    if verification.reproduces:
        return "it reproduces the failure on its own: verified, it ends in REPRODUCED"
    if verification.completed:
        return (
            "it replays the calls, but the violation lies in a relation between results "
            "that it does not check (see the message above)"
        )
    return verification.detail


def run_line(filename: str) -> str:
    """How to run a reproducer: from any folder, the script finds the checkout that wrote
    it; elsewhere (another machine) MMSPEC_HOME names one, or mmspec is installed there."""
    if INSTALLED:
        return (
            f"python {filename} [path/to/your/adapter.py] (from any folder, with mmspec "
            "installed)"
        )
    return (
        f"python {filename} [path/to/your/adapter.py] (from any folder; on another machine, "
        f"MMSPEC_HOME=/path/to/mmspec python {filename} ...)"
    )


def _count(steps: tuple[str, ...]) -> int:
    # an exhaustive search's path comes numbered, under unnumbered scenario lines
    return sum(1 for s in steps if re.match(r"\d+\. ", s))


def header_lines(report: GradeReport) -> list[str]:
    lines = [
        identity_line(),
        f"adapter: {report.adapter_name} ({report.adapter_ref})",
        f"rubric: {report.rubric.title} ({report.rubric.source})",
        f"profile: {report.profile}; seed: {report.shown_seed}",
        f"isolation: {report.isolation}",
    ]
    if not HAS_REFERENCE:
        lines.append(
            "student kit: no reference here (neither reference/ nor the models and oracles "
            "the properties compare with), so what needs it is graded on the autograder "
            "(\"needs the reference\": the rubric's autograder_only items, the hidden "
            "ones), and no reproducer scripts are written"
        )
    if report.provenance:
        lines.append("components (graded where the adapter provides them):")
        width = max(len(c) for c in report.provenance)
        lines += [
            f"  {c.ljust(width)}  {owner_text(report, owner)}"
            for c, owner in report.provenance.items()
        ]
    return lines


def owner_text(report: GradeReport, owner: str) -> str:
    """Who stood behind a component, from the student's point of view."""
    if owner == NEEDS_REFERENCE:
        return "not provided (no stand-in: the student kit has no reference)"
    return owner if owner == report.adapter_name else f"not provided (stand-in: {owner})"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def load_error_lines(report: GradeReport) -> list[str]:
    if report.load_error is None:
        return []
    return [
        "The adapter could not be loaded, so nothing was graded:",
        *(f"  {line}" for line in report.load_error.splitlines()),
        "Fix these and grade again (docs/grading.md: the adapter contract).",
    ]

"""Every text a report shows, made safe once, where it enters the report.

What a report quotes comes, in the end, from the code under test: an exception's
message, a returned hash, what the child printed, a value a property quotes in its
message. The verdict needs those values exact (a lone surrogate is a legal ``str``, and
comparing hashes is the property's job), so they are left alone until the report is
built; then :func:`safe_report` passes every text field through :func:`printable` (so
that no format's writer fails on it and no terminal obeys it) and, for quoted text,
:func:`cut_long` (so that a 20 MB value costs a report 250 characters, not 20 MB per
quote). Grading in process and isolated go through the same pass, so their reports stay
byte-identical.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # grade.py calls safe_report on every report it returns
    from harness.grading.grade import FailureDetail, GradeReport, ItemResult
    from harness.grading.reproducer import Reproducer

#: C0 and C1 controls but newline and tab, DEL, lone surrogates (no UTF-8 writer takes
#: one), the line/paragraph separators and the bidirectional overrides (which reorder
#: what a reader sees).
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
#: A run without spaces this long is a quoted value (a hash, a repr), cut to its head.
_LONG_RUN = re.compile(r"\S{240,}")
#: A line this long is cut too, whatever it holds.
_LONG_LINE = re.compile(r"^.{4000,}$", re.MULTILINE)
_HEAD = 200


def printable(text: str) -> str:
    """``text`` with every unsafe character shown as its escape (``\\x1b``,
    ``\\ud800``); idempotent, and the identity on ordinary text."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def cut_long(text: str) -> str:
    """``text`` with every long run and line cut to its first 200 characters, its
    length and a digest (two different long values stay told apart)."""
    return _LONG_LINE.sub(_cut, _LONG_RUN.sub(_cut, text))


def _cut(match: re.Match[str]) -> str:
    value = match.group()
    digest = hashlib.sha256(value.encode("utf-8", "backslashreplace")).hexdigest()[:16]
    return f"{value[:_HEAD]}...[{len(value)} characters in all, sha256 {digest}...]"


def quoted(text: str) -> str:
    """A text the report quotes: safe, and cut where long."""
    return cut_long(printable(text))


def safe_report(report: GradeReport) -> GradeReport:
    """``report`` with every text it shows made safe (see the module docstring)."""
    return replace(
        report,
        adapter_name=quoted(report.adapter_name),
        load_error=None if report.load_error is None else quoted(report.load_error),
        warnings=tuple(quoted(w) for w in report.warnings),
        items=tuple(_safe_item(result) for result in report.items),
        submission_output=printable(report.submission_output),
    )


def _safe_item(result: ItemResult) -> ItemResult:
    return replace(
        result,
        summary=quoted(result.summary),
        failures=tuple(_safe_failure(f) for f in result.failures),
    )


def _safe_failure(failure: FailureDetail) -> FailureDetail:
    return replace(
        failure,
        message=quoted(failure.message),
        steps=tuple(quoted(step) for step in failure.steps),
        reproducer_note=quoted(failure.reproducer_note),
        reproducer=None if failure.reproducer is None else _safe_script(failure.reproducer),
    )


def _safe_script(reproducer: Reproducer) -> Reproducer:
    """The script stays runnable: a control character inside a string literal, shown
    as its escape, still means itself; only its comments' long quotes are cut."""
    lines = printable(reproducer.script).split("\n")
    script = "\n".join(cut_long(line) if line.lstrip().startswith("#") else line for line in lines)
    verification = reproducer.verification
    if verification is not None:
        verification = replace(verification, detail=quoted(verification.detail))
    return replace(reproducer, script=script, verification=verification)

"""What ``verify`` gives a CI system besides its text report (issue 21).

- :func:`failures` — every failing row's clause, message, minimal counterexample,
  reproduce blob and replay command, as data (``--save-report`` writes them beside the
  verdicts);
- :func:`junit_xml` — one test case per (clause, property) row (``--junit-xml FILE``),
  named by clause id, classed by property: a FAIL/ERROR row a ``<failure>`` with the same
  explanation the text report gives, a row that judged nothing (``not provided``,
  ``blocked``) ``<skipped>``;
- :func:`github_annotations` and :func:`step_summary` — under GitHub Actions
  (``GITHUB_ACTIONS=true``), an ``::error`` line per failing row and a Markdown summary
  appended to ``$GITHUB_STEP_SUMMARY``.

Sized for what CI shows (issue 33, item 7): a property's time is shared among its rows
(a machine's run once, not once per clause), so the test cases' times add up to the
suite's; a skipped row says why in words; GitHub shows ten annotations a step, so there
are at most :data:`MAX_ANNOTATIONS` (the first failing rows, each the clause, its message
and the replay command, on the adapter's file when it is one), then one notice of how
many more; the step summary lists the failing rows and counts the rest.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from harness.grading.formats.junit import timestamp, xml_text
from harness.report import identity_line, replay_command
from harness.runner import ACCEPTED, ClauseRow, Failure, PropertyResult, Report, Verdict

#: GitHub Actions shows ten annotations of a kind per step: the rest are counted.
MAX_ANNOTATIONS = 10


def _failures_of(report: Report, row: ClauseRow) -> list[Failure]:
    result = report.results.get(row.property)
    if result is None:
        return []
    own = [f for f in result.failures if f.clause == row.clause]
    return own or [f for f in result.failures if f.verdict is Verdict.ERROR]


def failures(report: Report, row: ClauseRow, replay_options: str = "") -> list[dict[str, Any]]:
    """The failures behind one failing row, as data."""
    if row.verdict in ACCEPTED:
        return []
    return [
        {
            "clause": failure.clause,
            "verdict": failure.verdict.value,
            "message": failure.message,
            "counterexample": [
                part for note in failure.counterexample for part in note.strip("\n").splitlines()
            ],
            "reproduce": failure.reproduce,
            "set_aside": list(failure.set_aside),
            "replay": replay_command(report, row.property, failure.set_aside, replay_options),
        }
        for failure in _failures_of(report, row)
    ]


def _explanation(report: Report, row: ClauseRow, replay_options: str) -> str:
    lines: list[str] = []
    clause = report.clauses.get(row.clause)
    if clause is not None:
        lines += [f"{clause.id} — {clause.title}", f"statement: {clause.statement}"]
    for failure in failures(report, row, replay_options):
        lines.append(f"message: {failure['message']}")
        if failure["counterexample"]:
            lines += ["counterexample:", *(f"  {p}" for p in failure["counterexample"])]
        lines.append(f"replay: {failure['replay']}")
    result = report.results.get(row.property)
    if not lines[2:] and result is not None and result.run_detail():
        lines.append(f"why: {result.run_detail()}")
    return "\n".join(lines)


def junit_xml(report: Report, replay_options: str = "") -> str:
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=xml_text(f"mmspec verify {report.adapter_name}"),
        package="mmspec.verify",
        id="0",
        timestamp=timestamp(None),
        hostname="localhost",
        tests=str(len(report.rows)),
        failures=str(sum(r.verdict is Verdict.FAIL for r in report.rows)),
        errors=str(sum(r.verdict is Verdict.ERROR for r in report.rows)),
        skipped=str(sum(r.verdict not in (Verdict.PASS, Verdict.FAIL, Verdict.ERROR)
                        for r in report.rows)),
        time=f"{report.seconds:.3f}",
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (("judged_by", identity_line()), ("adapter", report.adapter_ref),
                        ("profile", report.profile)):
        ET.SubElement(properties, "property", name=name, value=xml_text(value))
    rows_of = Counter(row.property for row in report.rows)
    for row in report.rows:
        result = report.results.get(row.property)
        # one run of the property judged all its rows: its time, shared among them
        share = result.seconds / rows_of[row.property] if result else 0.0
        case = ET.SubElement(
            suite, "testcase", classname=row.property, name=row.clause, time=f"{share:.3f}"
        )
        if row.verdict in (Verdict.FAIL, Verdict.ERROR):
            tag = "failure" if row.verdict is Verdict.FAIL else "error"
            found = failures(report, row, replay_options)
            message = found[0]["message"] if found else row.verdict.value
            element = ET.SubElement(case, tag, message=xml_text(message), type=row.verdict.value)
            element.text = xml_text(_explanation(report, row, replay_options))
        elif row.verdict is not Verdict.PASS:
            reason = f"{row.verdict.value}: {_why_skipped(row, result)}"
            ET.SubElement(case, "skipped", message=xml_text(reason))
    ET.SubElement(suite, "system-out").text = xml_text(identity_line())
    ET.SubElement(suite, "system-err").text = ""
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def usage_error_junit(adapter_ref: str, message: str) -> str:
    """The JUnit file of a run that judged nothing (an adapter that cannot be loaded, an
    unknown selection): one error test case, ``adapter``, with the message, so that a CI
    reading the file reports it instead of nothing (as the pytest plugin does)."""
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites, "testsuite", name=xml_text(f"mmspec verify {adapter_ref}"),
        package="mmspec.verify", id="0", timestamp=timestamp(None), hostname="localhost",
        tests="1", failures="0", errors="1", skipped="0", time="0.000",
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (("judged_by", identity_line()), ("adapter", adapter_ref)):
        ET.SubElement(properties, "property", name=name, value=xml_text(value))
    case = ET.SubElement(suite, "testcase", classname="mmspec", name="adapter", time="0.000")
    first = message.splitlines()[0] if message else "usage error"
    element = ET.SubElement(case, "error", message=xml_text(first), type="usage error")
    element.text = xml_text(message)
    ET.SubElement(suite, "system-out").text = xml_text(identity_line())
    ET.SubElement(suite, "system-err").text = ""
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def usage_error_annotation(message: str) -> str:
    """The same as one GitHub Actions ``::error``."""
    return f"::error title={_escape_property('mmspec verify')}::{_escape_annotation(message)}"


def _why_skipped(row: ClauseRow, result: PropertyResult | None) -> str:
    """In words, why a row judged nothing (never only who implemented it)."""
    if result is not None:
        why = result.why_not_provided().get(row.clause) or result.run_detail()
        if why:
            return str(why)
    return f"nothing was judged (implementations: {row.implementations})"


def _escape_annotation(text: str) -> str:
    # GitHub's workflow commands: %, CR and LF are escaped in the message
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_annotations(report: Report, replay_options: str = "") -> list[str]:
    """One ``::error`` workflow command for each of the first :data:`MAX_ANNOTATIONS` rows
    that are neither pass nor not provided — the clause, the message and the replay
    command, not the whole counterexample (the report and the step summary have it) —
    then a ``::notice`` counting the others."""
    bad = [row for row in report.rows if row.verdict not in ACCEPTED]
    where = _annotated_file(report.adapter_ref)
    lines = []
    for row in bad[:MAX_ANNOTATIONS]:
        title = f"{row.clause} {row.verdict.value} ({row.property})"
        found = failures(report, row, replay_options)
        clause = report.clauses.get(row.clause)
        body = [f"{clause.id} — {clause.title}"] if clause is not None else []
        body += [f"message: {_first_lines(f['message'])}\nreplay: {f['replay']}" for f in found]
        lines.append(f"::error {where}title={_escape_property(title)}::"
                     f"{_escape_annotation(chr(10).join(body) or row.verdict.value)}")
    if len(bad) > MAX_ANNOTATIONS:
        more = len(bad) - MAX_ANNOTATIONS
        lines.append(f"::notice title={_escape_property('mmspec verify')}::{more} more failing "
                     f"row{'s' if more > 1 else ''}: see the step summary or the report")
    return lines


def _escape_property(text: str) -> str:
    return _escape_annotation(text).replace(":", "%3A").replace(",", "%2C")


def _first_lines(text: str, count: int = 3) -> str:
    lines = text.splitlines()
    return "\n".join(lines[:count]) + (f"\n[{len(lines) - count} more lines]"
                                        if len(lines) > count else "")


def _annotated_file(adapter_ref: str) -> str:
    """``file=...,`` naming the adapter's file when it is a ``.py`` file below the current
    folder (where GitHub can show it), else nothing."""
    path = Path(adapter_ref)
    if path.suffix != ".py" or not path.is_file():
        return ""
    try:
        relative = Path(os.path.relpath(path.resolve(), Path.cwd()))
    except ValueError:
        return ""
    if relative.parts and relative.parts[0] == "..":
        return ""
    return f"file={_escape_property(relative.as_posix())},"


def step_summary(report: Report, replay_options: str = "") -> str:
    """A Markdown summary: the failing rows' table and each one's explanation; the other
    rows counted by verdict, not listed (a whole suite is over a hundred rows)."""
    bad = [row for row in report.rows if row.verdict not in ACCEPTED]
    others = Counter(row.verdict.value for row in report.rows if row.verdict in ACCEPTED)
    lines = [
        f"### mmspec verify: {report.adapter_name} — "
        f"{'OK' if report.ok else f'{len(bad)} of {len(report.rows)} rows failing'}",
        "",
        f"`{identity_line()}`, profile `{report.profile}`",
        "",
    ]
    if bad:
        lines += [
            "| clause | property | verdict |",
            "| --- | --- | --- |",
            *(f"| {r.clause} | `{r.property}` | {r.verdict.value} |" for r in bad),
            "",
        ]
    lines.append("The other rows: " + (
        ", ".join(f"{count} {verdict}" for verdict, count in sorted(others.items()))
        or "none"
    ) + ".")
    for row in bad:
        lines += ["", f"#### {row.clause} ({row.property})", "", "```",
                  _explanation(report, row, replay_options).replace("```", "'''"), "```"]
    return "\n".join(lines) + "\n"

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
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from harness.grading.formats.junit import timestamp, xml_text
from harness.report import identity_line, replay_command
from harness.runner import ACCEPTED, ClauseRow, Failure, Report, Verdict


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
    for row in report.rows:
        result = report.results.get(row.property)
        case = ET.SubElement(
            suite, "testcase", classname=row.property, name=row.clause,
            time=f"{result.seconds:.3f}" if result else "0",
        )
        if row.verdict in (Verdict.FAIL, Verdict.ERROR):
            tag = "failure" if row.verdict is Verdict.FAIL else "error"
            found = failures(report, row, replay_options)
            message = found[0]["message"] if found else row.verdict.value
            element = ET.SubElement(case, tag, message=xml_text(message), type=row.verdict.value)
            element.text = xml_text(_explanation(report, row, replay_options))
        elif row.verdict is not Verdict.PASS:
            why = result.why_not_provided().get(row.clause) if result is not None else None
            reason = f"{row.verdict.value}: {why or row.implementations}"
            ET.SubElement(case, "skipped", message=xml_text(reason))
    ET.SubElement(suite, "system-out").text = xml_text(identity_line())
    ET.SubElement(suite, "system-err").text = ""
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _escape_annotation(text: str) -> str:
    # GitHub's workflow commands: %, CR and LF are escaped in the message
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_annotations(report: Report, replay_options: str = "") -> list[str]:
    """One ``::error`` workflow command per row that is neither pass nor not provided."""
    lines = []
    for row in report.rows:
        if row.verdict in ACCEPTED:
            continue
        title = f"{row.clause} {row.verdict.value} ({row.property})"
        body = _explanation(report, row, replay_options)
        lines.append(f"::error title={_escape_annotation(title).replace(',', '%2C')}::"
                     f"{_escape_annotation(body)}")
    return lines


def step_summary(report: Report, replay_options: str = "") -> str:
    """A Markdown summary: the verdict table, then each failing row's explanation."""
    bad = [row for row in report.rows if row.verdict not in ACCEPTED]
    lines = [
        f"### mmspec verify: {report.adapter_name} — "
        f"{'OK' if report.ok else f'{len(bad)} of {len(report.rows)} rows failing'}",
        "",
        f"`{identity_line()}`, profile `{report.profile}`",
        "",
        "| clause | property | verdict |",
        "| --- | --- | --- |",
        *(f"| {r.clause} | `{r.property}` | {r.verdict.value} |" for r in report.rows),
    ]
    for row in bad:
        lines += ["", f"#### {row.clause} ({row.property})", "", "```",
                  _explanation(report, row, replay_options).replace("```", "'''"), "```"]
    return "\n".join(lines) + "\n"

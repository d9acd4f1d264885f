"""JUnit XML, valid against the Apache Ant JUnit schema (tests/fixtures/junit.xsd, the
common "JUnit.xsd" that CI servers read): one ``<testcase>`` per rubric item.

A failed item is a ``<failure>`` (a clause violation) or an ``<error>`` (the
implementation crashed); an item not graded (not provided, not attempted, blocked) is
``<skipped>``. The schema requires a timestamp: it is the time of the run, or
``$SOURCE_DATE_EPOCH`` when set (reproducible builds' convention), and the host name is
always ``localhost`` so that reports from different machines compare equal.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from harness.grading.formats.common import item_lines, load_error_lines, points, score_line
from harness.grading.grade import GradeReport, ItemResult, ItemStatus

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def render_junit(report: GradeReport, now: datetime | None = None) -> str:
    failures = sum(1 for r in report.items if _kind(r) == "failure")
    errors = sum(1 for r in report.items if _kind(r) == "error")
    skipped = sum(1 for r in report.items if _kind(r) == "skipped")
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        {
            "name": f"mmspec grade {report.adapter_name}",
            "package": "mmspec.grading",
            "id": "0",
            "timestamp": timestamp(now),
            "hostname": "localhost",
            "tests": str(len(report.items)),
            "failures": str(failures),
            "errors": str(errors),
            "skipped": str(skipped),
            "time": f"{report.seconds:.3f}",
        },
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("adapter", report.adapter_ref),
        ("adapter_name", report.adapter_name),
        ("rubric", report.rubric.source),
        ("profile", report.profile),
        ("seed", report.shown_seed),
        ("score", f"{points(report.score)}/{points(report.max_score)}"),
    ):
        ET.SubElement(properties, "property", {"name": name, "value": xml_text(value)})
    for result in report.items:
        suite.append(_testcase(result))
    out = ET.SubElement(suite, "system-out")
    summary = [f"score: {score_line(report)}", *load_error_lines(report), *report.warnings]
    out.text = xml_text("\n".join(summary))
    ET.SubElement(suite, "system-err").text = ""
    ET.indent(suites)
    body = ET.tostring(suites, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _testcase(result: ItemResult) -> ET.Element:
    item = result.item
    case = ET.Element(
        "testcase",
        {
            "name": xml_text(f"{item.number}. {item.name}"),
            "classname": "mmspec.rubric",
            "time": f"{result.seconds:.3f}",
        },
    )
    kind = _kind(result)
    if kind == "passed":
        return case
    text = xml_text("\n".join(item_lines(result, inline_scripts=True)))
    message = xml_text(f"{result.status.value}: {result.summary}")
    if kind == "skipped":
        ET.SubElement(case, "skipped", {"message": message})
    else:
        kind_type = "ImplementationError" if kind == "error" else "ClauseViolation"
        element = ET.SubElement(case, kind, {"message": message, "type": kind_type})
        element.text = text
    return case


def _kind(result: ItemResult) -> str:
    if result.status is ItemStatus.PASSED:
        return "passed"
    if result.status is not ItemStatus.FAILED:
        return "skipped"
    if result.failures and all(f.clause is None for f in result.failures):
        return "error"
    return "failure"


def timestamp(now: datetime | None) -> str:
    if now is None:
        epoch = os.environ.get("SOURCE_DATE_EPOCH")
        now = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S")


def xml_text(text: str) -> str:
    """Characters XML 1.0 cannot carry (NUL, other C0 controls) written as escapes."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)

"""Report formats: terminal text, Markdown, JSON, JUnit XML and Gradescope results.json."""

from __future__ import annotations

from collections.abc import Callable

from harness.grading.formats.gradescope import render_gradescope
from harness.grading.formats.json_report import render_json
from harness.grading.formats.junit import render_junit
from harness.grading.formats.markdown import render_markdown
from harness.grading.formats.text import render_text
from harness.grading.grade import GradeReport

FORMATS: dict[str, Callable[[GradeReport], str]] = {
    "text": render_text,
    "markdown": render_markdown,
    "json": render_json,
    "junit": render_junit,
    "gradescope": render_gradescope,
}


def render(report: GradeReport, format_name: str) -> str:
    """``report`` in the format ``format_name`` (a key of :data:`FORMATS`)."""
    try:
        renderer = FORMATS[format_name]
    except KeyError:
        raise ValueError(
            f"unknown format {format_name!r}; choose one of {', '.join(FORMATS)}"
        ) from None
    return renderer(report)

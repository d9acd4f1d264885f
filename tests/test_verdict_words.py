"""One verdict for one situation, wherever it is printed (issue 32, item 6).

A build without an optional capability (item identifiers, the engine's resets, weight
updates, drafter, async scheduling) or without an optional component (the item cache)
is "not provided" on those rows: the progress lines of ``verify`` and ``grade``, the
text table, the JUnit and step-summary outputs of ``verify`` and every grade format say
so, and none says VACUOUS or that a coverage shortfall is the suite's. Every reason
is there in words, each once, never cut to a digest.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from harness import ci_output, cli
from harness.grading.formats import FORMATS
from harness.grading.grade import GradeReport, ItemStatus, grade
from harness.grading.rubric import load_rubric
from harness.report import render
from harness.runner import Report, Verdict, verify
from properties.framework import Parts, PropertySpec, Runnable
from spec.clauses import Clause

GOOD = str(Path(__file__).resolve().parent / "fixtures" / "good_adapter.py")

#: The reference with none of the optional capabilities and no item cache.
LACKING = '''
from __future__ import annotations

from typing import Any

from reference.adapter import ADAPTER as REF
from reference.engine import EngineLoop
from reference.hasher import Hasher
from spec.adapter import Adapter, EngineParts
from spec.types import EngineConfig


class PlainHasher:
    """The reference hasher without the optional item_identifier()."""

    def __init__(self) -> None:
        self._inner = Hasher()

    def hash_item(self, data: Any, options: Any = None) -> str:
        return self._inner.hash_item(data, options)


class PlainEngine:
    """The reference engine loop without resets, weight updates, drafter or async."""

    _HIDDEN = frozenset({"reset_encoder_cache", "reset_prefix_cache", "update_weights",
                         "async_scheduling", "num_speculative_tokens",
                         "mamba_block_aligned"})

    def __init__(self, config: EngineConfig, parts: EngineParts) -> None:
        self._inner = EngineLoop(config, parts)

    def __getattr__(self, name: str) -> Any:
        if name in self._HIDDEN:
            raise AttributeError(name)
        return getattr(self._inner, name)


ADAPTER = Adapter(
    name="lacking",
    processor=REF.processor, hasher=PlainHasher, encoder=REF.encoder,
    encoder_cache_manager=REF.encoder_cache_manager,
    encoder_decoder_cache_manager=REF.encoder_decoder_cache_manager,
    splice=REF.splice, scheduling_hook=REF.scheduling_hook, block_hasher=REF.block_hasher,
    item_cache=None, worker_store=REF.worker_store, engine_loop=PlainEngine,
)
'''

#: The optional clauses (each "not provided" for LACKING), and one it provides.
OPTIONAL = ["HASH-7", "HASH-8", "FIC-1", "FIC-2", "FIC-3", "FIC-4",
            "SYS-11", "SYS-12", "SYS-13", "SYS-14", "SYS-15", "SYS-16"]
ONLY = [*OPTIONAL, "HASH-1"]
ENGINE_ITEM = (
    "Engine loop, optional: resets, weight updates, a drafter, async scheduling, hybrid models"
)
#: What cut_long leaves of a text it cuts (harness/grading/report_text.py).
CUT = "characters in all"
_PROGRESS = re.compile(r"^(?:\[grade\] )?\[\d+/\d+\] (?P<name>\S+)(?: \.\.\.|:) "
                       r"(?P<words>.+) \(\d+\.\d s\)$")


@pytest.fixture(scope="module")
def lacking(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("lacking") / "lacking.py"
    path.write_text(LACKING, encoding="utf-8")
    return str(path)


def progress_words(lines: list[str]) -> dict[str, str]:
    """Property -> the words its (closing) progress line gave for its verdict."""
    words = {}
    for line in lines:
        match = _PROGRESS.match(line.strip())
        if match:
            words[match["name"]] = match["words"]
    return words


def said_for(words: str, clause: str) -> str:
    """The verdict a progress line's words give ``clause``: one word for every clause,
    or "verdict: clauses; verdict: clauses"."""
    if ": " not in words:
        return words
    for group in words.split("; "):
        verdict, clauses = group.split(": ", 1)
        if clause in clauses.split(", "):
            return verdict
    raise AssertionError(f"{clause} not in the progress words {words!r}")


def table_verdicts(text: str) -> dict[tuple[str, str], str]:
    """(clause, property) -> verdict, read from the text report's table."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("clause  property"))
    found = {}
    for line in lines[start + 2:]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        found[(cells[0], cells[1])] = cells[3]
    return found


@pytest.fixture(scope="module")
def verified(lacking: str) -> tuple[Report, list[str]]:
    """The report of ``verify``, and the progress lines it printed (harness.cli's)."""
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):
        report = verify(lacking, "ci", ONLY, progress=cli._progress)
    return report, printed.getvalue().splitlines()


def test_verify_prints_the_rows_verdict_in_every_output(
    verified: tuple[Report, list[str]],
) -> None:
    report, lines = verified
    rows = {(row.clause, row.property): row.verdict.value for row in report.rows}
    assert {rows[(c, p)] for c, p in rows if c in OPTIONAL} == {"not provided"}, rows
    assert {rows[(c, p)] for c, p in rows if c == "HASH-1"} == {"pass"}, rows
    words = progress_words(lines)
    assert {(c, p): said_for(words[p], c) for c, p in rows} == rows, lines
    # the text report: its table, and nothing that calls these rows anything else
    text = render(report)
    assert table_verdicts(text) == rows
    assert "VACUOUS" not in text and CUT not in text, text
    # each "not provided" row's reason, in words, once
    assert "hash_uuid_names_its_content: HASH-7: the hasher does not provide the optional " \
        "item_identifier() (HASH-7)" in text, text
    assert text.count("does not provide update_weights()") == 1, text
    # JUnit: a skipped case per such row, its message the verdict and the row's reason
    cases = ET.fromstring(ci_output.junit_xml(report)).iter("testcase")
    for case in cases:
        verdict = rows[(case.get("name", ""), case.get("classname", ""))]
        skipped = case.find("skipped")
        if verdict == "pass":
            assert skipped is None
            continue
        assert skipped is not None
        message = skipped.get("message", "")
        assert message.startswith(f"{verdict}: ") and "does not provide" in message, message
    # the GitHub step summary: no row fails, so each verdict is counted in the same words
    summary = ci_output.step_summary(report)
    counts = Counter(rows.values())
    counted = ", ".join(f"{count} {verdict}" for verdict, count in sorted(counts.items()))
    assert f"The other rows: {counted}." in summary, summary


@pytest.fixture(scope="module")
def graded(lacking: str) -> tuple[GradeReport, list[str]]:
    lines: list[str] = []
    report = grade(lacking, load_rubric(), "ci", only=ONLY, reproducers=False,
                   progress=lines.append)
    return report, lines


def test_grade_prints_one_verdict_for_a_missing_capability(
    verified: tuple[Report, list[str]], graded: tuple[GradeReport, list[str]]
) -> None:
    rows, _ = verified
    report, lines = graded
    words = progress_words(lines)
    for row in rows.rows:
        assert said_for(words[row.property], row.clause) == row.verdict.value, lines
    optional = [r for r in report.items if set(r.item.clauses) <= set(OPTIONAL)]
    assert len(optional) == 3, [r.item.name for r in report.items]
    assert {r.status for r in optional} == {ItemStatus.NOT_PROVIDED}
    assert report.warnings == ()  # no "VACUOUS ... the coverage shortfall is the suite's"
    for name, render_grade in FORMATS.items():
        out = render_grade(report)
        assert "VACUOUS" not in out and "shortfall" not in out, (name, out)
        assert CUT not in out, (name, out)
    text = FORMATS["text"](report)
    for result in optional:
        assert re.search(rf"{re.escape(result.item.name)} +0/0 +not provided$", text, re.M)
    parsed = json.loads(FORMATS["json"](report))
    assert {i["status"] for i in parsed["items"] if i["name"] in
            {r.item.name for r in optional}} == {"not provided"}
    tests = json.loads(FORMATS["gradescope"](report))["tests"]
    assert all(t["output"].startswith("**not provided**: ") and "status" not in t
               for t in tests if t["name"] in {r.item.name for r in optional})
    junit = ET.fromstring(FORMATS["junit"](report))
    for case in junit.iter("testcase"):
        if any(case.get("name", "").endswith(r.item.name) for r in optional):
            skipped = case.find("skipped")
            assert skipped is not None
            assert skipped.get("message", "").startswith("not provided: ")


def test_a_long_reason_is_summarised_in_words_not_cut(
    graded: tuple[GradeReport, list[str]],
) -> None:
    """The engine item's reason named every clause of four machines' probes, 5336
    characters, and was cut to a digest; now each reason once, with its clauses."""
    report, _ = graded
    engine = next(r for r in report.items if r.item.name == ENGINE_ITEM)
    summary = engine.summary
    assert CUT not in summary and len(summary) < 1000, summary
    assert summary.startswith("SYS-11: the engine loop does not provide reset_encoder_cache()")
    for clause, reason in (
        ("SYS-12", "the engine loop does not provide update_weights() (SYS-12)"),
        ("SYS-13, SYS-14", "the engine loop does not provide a drafter"),
        ("SYS-13, SYS-14, SYS-15", "the engine loop does not provide async scheduling"),
        ("SYS-16", "the engine loop does not provide hybrid models"),
    ):
        assert f"{clause}: {reason}" in summary, summary
        assert summary.count(reason) == 1, summary
    assert "SYS-1:" not in summary  # the machines' SYS-1..10 are not this item's


# --- a property with one clause provided and one not ----------------------------------


def _nothing_runs(parts: Parts) -> Runnable:
    return Runnable(run=lambda settings: None)


def test_a_mixed_property_names_each_verdict_with_its_clauses() -> None:
    """A capability lacking for A-1 only: A-1 is "not provided" with its own reason (a
    reason may hold "; "), A-2 keeps the run's verdict with the run's own detail."""
    spec = PropertySpec(
        "mixed", ("A-1", "A-2"), ("hasher",), (), _nothing_runs, __name__,
        capabilities=(("A-1", lambda parts: "no frobnicate(); not even a stub (A-1)"),),
    )
    clauses = {
        c: Clause(id=c, title=f"title of {c}", statement="s", symptom="y", upstream="u",
                  checked_by=("mixed",))
        for c in ("A-1", "A-2")
    }
    report = verify(GOOD, "ci", registry={"mixed": spec}, clauses=clauses, fallback_ref=None,
                    transitions={})
    result = report.results["mixed"]
    assert [row.verdict for row in report.rows] == [Verdict.NOT_PROVIDED, Verdict.VACUOUS]
    assert result.verdict_text() == "VACUOUS: A-2; not provided: A-1"
    assert result.why_not_provided() == {"A-1": "no frobnicate(); not even a stub (A-1)"}
    assert result.run_detail() == "no test case ran"
    text = render(report)
    assert "== VACUOUS mixed (A-2) ==" in text, text
    assert "why: no test case ran" in text
    assert "mixed: A-1: no frobnicate(); not even a stub (A-1)" in text

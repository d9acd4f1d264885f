"""The figures the docs state agree with what computes them (issue 32, item 7):
``benchmarks/doc_figures.py`` rewrites them, and this test fails when one is stale —
the defects each pinned vLLM release exits 1 for (its declaration in
``adapters/vllm/expected/``), the rows ``--baseline`` prints between the two releases, and
the student kit's size and file count (the kit built here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import doc_figures
from harness.declared import load_declaration

FIX = "PYTHONPATH=. .venv/bin/python benchmarks/doc_figures.py (rewrites them)"


def test_every_figure_agrees_with_its_script() -> None:
    problems = doc_figures.problems()
    assert not problems, "\n".join(problems) + f"\n\nstale figures: run {FIX}"


@pytest.mark.parametrize("version", doc_figures.declared_versions())
def test_docs_name_each_release_s_declared_defects(version: str) -> None:
    """Read apart from the script: the defects docs/vllm.md names for a release are the
    findings of class ``defect`` its declaration gives its rows (the ones ``verify
    --vllm VERSION`` reports as standing and exits 1 for)."""
    declaration = load_declaration(version)
    assert declaration is not None
    declared = {
        finding
        for _verdict, finding in declaration.rows.values()
        if declaration.findings[finding][0] == "defect"
    }
    text = " ".join(doc_figures.VLLM_DOC.read_text(encoding="utf-8").split())
    match = re.search(rf"{re.escape(version)} exits 1 for its defects ((?:V\d+(?:, | and )?)+)",
                      text)
    assert match is not None, f"docs/vllm.md names no defects for {version}"
    named = set(re.findall(r"V\d+", match[1]))
    assert named == declared, (
        f"docs/vllm.md names {sorted(named)} for {version}; its declaration's defects are "
        f"{sorted(declared)}"
    )


def test_the_kit_figure_is_the_kit_built() -> None:
    size, files = doc_figures.student_kit()
    shown = doc_figures.FIGURES[-1].found()
    said = re.fullmatch(r"about (\d+) KB, (\d+) files", " ".join(shown.split()))
    assert said is not None, shown
    assert int(said[2]) == files, f"docs/grading.md says {said[2]} files; the kit has {files}"
    assert abs(int(said[1]) * 1000 - size) <= size / 10, (
        f"docs/grading.md says about {said[1]} KB; the kit is {size} bytes"
    )


def test_a_stale_figure_is_seen_and_rewritten(tmp_path: Path) -> None:
    """Not vacuous: the texts of issue 32 read as stale, and writing fixes them."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "finding that stopped failing. Today 0.33.0 exits 1 for its\ndefects V12 and V13, "
        "and 0.22.1 for its defects (the declarations' own: ...). A tree\n\n"
        "`studentkit/make_kit.py` writes a zip (about 350 KB, 97 files; byte-for-byte\n",
        encoding="utf-8",
    )
    figures = [
        doc_figures.Figure(f.name, doc, f.where, f.compute, f.agrees)
        for f in doc_figures.FIGURES
        if f.name != doc_figures.FIGURES[1].name
    ]
    assert all(f.problem() is not None for f in figures)
    assert all(f.write() for f in figures)
    assert all(f.problem() is None for f in figures)
    defects = "0.33.0 exits 1 for its defects V12, V13, V17, V18, V21, V23, V27 and V30"
    assert defects in doc.read_text()

"""What the code and the docs cite exists: every clause id named in spec/, reference/,
properties/ and the docs is a clause of SPEC.md, and every document or file they point a
reader to is in the repository (issue 19: a student reads these, and a citation that
leads nowhere is a rule they must guess)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spec.clauses import load_clauses

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = "EXP|HASH|ENC|ECM|ECD|SPL|SCH|PFX|WRK|DIFF|SYS"
CLAUSE_ID = re.compile(rf"\b(?:{FAMILIES})-\d+\b")
#: A path into the repository: a top-level folder, then a file with an extension.
TOP = (
    "docs|spec|tests|properties|harness|exhaustive|contracts|reference|adapters|benchmarks"
    "|fuzz|gradescope|rubrics"
)
CITED_PATH = re.compile(rf"(?<![\w/.-])((?:{TOP})/[\w./-]*\w\.(?:md|py|toml|json|txt))\b")
#: A bare document name, resolved where the repository keeps it.
BARE_DOCS = {"SPEC.md": "spec/SPEC.md", "README.md": "README.md"}
CITED_DOC = re.compile(r"(?<![\w/.-])([A-Z][A-Za-z_]*\.md)\b")


def _sources() -> list[Path]:
    folders = ("spec", "reference", "properties", "harness", "exhaustive", "contracts")
    code = [p for d in folders for p in (ROOT / d).rglob("*.py")]
    docs = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "spec/SPEC.md"]
    return sorted(code) + docs


SOURCES = _sources()


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_cited_clause_ids_exist(path: Path) -> None:
    known = set(load_clauses())
    cited = set(CLAUSE_ID.findall(path.read_text(encoding="utf-8")))
    assert cited <= known, f"{_rel(path)} cites {sorted(cited - known)}, not clauses of SPEC.md"


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_cited_documents_exist(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    paths = set(CITED_PATH.findall(text))
    paths |= {BARE_DOCS.get(d, f"docs/{d}") for d in CITED_DOC.findall(text)}
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"{_rel(path)} cites {missing}, which the repository does not have"


def test_the_checks_find_what_they_look_for() -> None:
    """The patterns are not vacuous: they see a known citation of each kind."""
    sample = "see SCH-6 and HASH-99 in docs/grading.md, docs/nowhere.md, SPEC.md and DESIGN.md"
    assert CLAUSE_ID.findall(sample) == ["SCH-6", "HASH-99"]
    assert CITED_PATH.findall(sample) == ["docs/grading.md", "docs/nowhere.md"]
    assert CITED_DOC.findall(sample) == ["SPEC.md", "DESIGN.md"]

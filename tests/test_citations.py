"""What the code and the docs cite exists: every clause id named in spec/, reference/,
properties/ and the docs is a clause of SPEC.md, and every document or file they point a
reader to is in the repository (issue 19: a student reads these, and a citation that
leads nowhere is a rule they must guess)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.grading.rubric import load_rubric
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


# --- a clause's rule, as the docs, docstrings and rubric state it (issue 32, item 7) ------


@dataclass(frozen=True)
class Withdrawn:
    """A rule SPEC.md once stated for ``clause`` and withdrew (docs/findings.md). A
    paragraph that cites the clause must not state it again, unless it says what the
    clause says now (``allowance``: a text may describe an implementation that goes
    beyond the clause, or quote the old rule as withdrawn)."""

    clause: str
    rule: str
    #: How a text states the withdrawn rule.
    phrasing: re.Pattern[str]
    #: Words of the rule as SPEC.md states it now.
    allowance: re.Pattern[str]
    #: Words SPEC.md's statement of the clause holds today (the list itself stays true).
    now: str


WITHDRAWN = (
    Withdrawn(
        "ECM-7",
        "a drain lists each freed hash once (V6)",
        re.compile(
            r"\b(?:each|exactly|only|just|at most)(?: \w+)? once\b"
            r"|\b(?:freed|reported|listed|drained|returned|dropped) once\b",
            re.IGNORECASE,
        ),
        re.compile(
            r"\bmore than once\b|\bmay (?:be listed|list|repeat)\b|\ballows? (?:a )?repeats?\b"
            r"|\brepeats? ECM-7 allows\b|\bwithdrawn\b|\bused to\b",
            re.IGNORECASE,
        ),
        "A hash may be listed more than once",
    ),
    Withdrawn(
        "ECM-3",
        "get_cached_input_ids lists exactly the items the request references (V3)",
        re.compile(
            r"\bexactly the (?:\w+ )?items\b|\bexactly the referenced\b"
            r"|\bitems whose references it (?:currently )?holds\b",
            re.IGNORECASE,
        ),
        re.compile(r"\bmay list other items\b|\bwithdrawn\b|\bused to\b", re.IGNORECASE),
        "may list other items of `r` whose hash is held",
    ),
)

#: Where a clause's rule is restated: the sources above, the rubrics, what the student
#: kit adds and the adapter template.
TEXTS = sorted({
    *SOURCES,
    *(ROOT / "rubrics").glob("*.toml"),
    *(ROOT / "studentkit").glob("*.md"),
    *(ROOT / "studentkit").glob("*.py"),
    *(ROOT / "adapters" / "template").glob("*.py"),
})
_BLANK = re.compile(r"\n[ \t]*#?[ \t]*\n")


def paragraphs(text: str) -> list[str]:
    """The text's paragraphs (blocks between blank lines; a comment's ``#`` line too),
    each on one line."""
    return [" ".join(block.split()) for block in _BLANK.split(text) if block.strip()]


def restated(text: str, rule: Withdrawn, cited: bool = False) -> list[str]:
    """The paragraphs of ``text`` that cite ``rule.clause`` (every one when ``cited``)
    and state the withdrawn rule without the clause's rule of today."""
    return [
        p
        for p in paragraphs(text)
        if (cited or re.search(rf"\b{re.escape(rule.clause)}\b", p))
        and rule.phrasing.search(p)
        and not rule.allowance.search(p)
    ]


def test_the_withdrawn_rules_are_withdrawn_in_spec() -> None:
    clauses = load_clauses()
    for rule in WITHDRAWN:
        statement = clauses[rule.clause].statement
        assert rule.now in statement, (rule.clause, rule.now)
        assert "withdrawn" in statement, f"{rule.clause}: SPEC.md names no withdrawn form"


@pytest.mark.parametrize("path", TEXTS, ids=_rel)
def test_no_text_restates_a_withdrawn_rule(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    found = [(r.clause, r.rule, p) for r in WITHDRAWN for p in restated(text, r)]
    assert not found, f"{_rel(path)} restates a rule SPEC.md withdrew: {found}"


def test_the_withdrawn_rules_see_their_old_wording() -> None:
    """Not vacuous: the texts this check was written for (issue 32) are caught, and
    their corrections are not."""
    ecm7, ecm3 = WITHDRAWN
    old = [
        ("Drain the hashes evicted since the last drain that are not held now, each\n"
         "        once (ECM-7).", ecm7, False),
        ("A is evicted (and its hash reported freed once)", ecm7, True),
        ("Finish A, admit B: A is evicted and reported freed once; B is not rejected.",
         ecm7, True),
        ("The request's items whose references it currently holds (ECM-3).", ecm3, False),
    ]
    for text, rule, cited in old:
        assert restated(text, rule, cited), text
    fine = [
        ("every hash evicted since the last drain that is not held now; a hash evicted "
         "twice may be listed twice (ECM-7)", ecm7),
        ("each listed once here; an implementation may repeat one (ECM-7)", ecm7),
        ("an earlier form of ECM-7 demanded \"exactly once\" and was withdrawn", ecm7),
        ("a step encodes each hash at most once (SYS-3)", ecm7),
        ("every item through which the request references a hash; it may list other "
         "items whose hash is held (ECM-3)", ecm3),
    ]
    for text, rule in fine:
        assert not restated(text, rule), text


# --- what a rubric item's description says, against its clauses ---------------------------

_CALL = re.compile(r"\b([A-Za-z_][\w.]*)\(\)")
_QUOTED = re.compile(r"'([^']{12,})'")
_IDENTIFIER = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


def _rubrics() -> list[Path]:
    return sorted((ROOT / "rubrics").glob("*.toml"))


@pytest.mark.parametrize("path", _rubrics(), ids=_rel)
def test_each_rubric_description_states_only_what_its_clauses_state(path: Path) -> None:
    """Each item's description cites only the item's clauses, names only the calls its
    clauses' statements name, quotes only messages they give ("..." for what varies),
    names only identifiers SPEC.md has (a lab test's name: one the lab has), and
    restates no rule SPEC.md withdrew from its clauses."""
    clauses = load_clauses()
    spec = (ROOT / "spec" / "SPEC.md").read_text(encoding="utf-8")
    lab = (ROOT / "tests" / "test_scheduling_lab.py").read_text(encoding="utf-8")
    for item in load_rubric(path).items:
        said = item.description
        own = " ".join(
            f"{clauses[c].title} {clauses[c].statement} {clauses[c].symptom}"
            for c in item.clauses
        )
        where = f"{_rel(path)}, {item.name!r}"
        cited = set(CLAUSE_ID.findall(said))
        assert cited <= set(item.clauses), f"{where} cites {sorted(cited - set(item.clauses))}"
        calls = [c for c in _CALL.findall(said) if c.rsplit(".", 1)[-1] not in own]
        assert not calls, f"{where} names {calls}, which its clauses do not"
        for message in _QUOTED.findall(said):
            pattern = r"\s*".join(re.escape(part.strip()) for part in message.split("..."))
            assert re.search(pattern.replace(r"\s*", r".*?"), own), (where, message)
        for name in _IDENTIFIER.findall(said):
            home, what = (lab, "the lab") if name.startswith("test_") else (spec, "SPEC.md")
            assert name in home, f"{where} names {name}, which {what} does not"
        for rule in WITHDRAWN:
            if rule.clause in item.clauses:
                assert not restated(said, rule, cited=True), f"{where} restates {rule.rule}"

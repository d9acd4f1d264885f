"""Read the clauses and the declared transitions out of ``SPEC.md``.

SPEC.md is the single source of clause text: the runner prints a failing clause's
statement from here, and a test checks that every property names a clause that exists
and every clause names properties that exist.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SPEC_PATH = Path(__file__).with_name("SPEC.md")

_HEADING = re.compile(r"^### (?P<id>[A-Z]+-\d+) — (?P<title>.+)$")
_FIELD = re.compile(r"^- \*\*(?P<name>[A-Za-z ]+):\*\* (?P<value>.*)$")
_TRANSITIONS = re.compile(r"^- `(?P<machine>\w+)`: (?P<body>.*)$")
_TRANSITION_NAME = re.compile(r"`(\w+)` \(")
_TRANSITION_JUDGES = re.compile(
    r"`(\w+)` \([^()]*; judges (?P<clauses>[A-Z]+-\d+(?:, [A-Z]+-\d+)*)\)"
)


@dataclass(frozen=True)
class Clause:
    id: str
    title: str
    statement: str
    symptom: str
    upstream: str
    checked_by: tuple[str, ...]

    @property
    def family(self) -> str:
        return self.id.split("-")[0]


@lru_cache(maxsize=1)
def load_clauses() -> dict[str, Clause]:
    """Every clause of SPEC.md by id, in document order."""
    clauses: dict[str, Clause] = {}
    current: dict[str, str] = {}

    def flush() -> None:
        if not current:
            return
        missing = {"Statement", "Symptom", "Upstream", "Checked by"} - current.keys()
        if missing:
            raise ValueError(f"SPEC.md clause {current['id']} lacks {sorted(missing)}")
        names = tuple(re.findall(r"`([^`]+)`", current["Checked by"]))
        clauses[current["id"]] = Clause(
            id=current["id"],
            title=current["title"],
            statement=current["Statement"],
            symptom=current["Symptom"],
            upstream=current["Upstream"],
            checked_by=names,
        )
        current.clear()

    for line in SPEC_PATH.read_text(encoding="utf-8").splitlines():
        heading = _HEADING.match(line)
        if heading:
            flush()
            current.update(id=heading["id"], title=heading["title"])
            continue
        if line.startswith("## "):
            flush()
            continue
        field = _FIELD.match(line)
        if field and current:
            current[field["name"]] = field["value"]
    flush()
    return clauses


@lru_cache(maxsize=1)
def load_transitions() -> dict[str, tuple[str, ...]]:
    """Machine name -> the transitions SPEC.md declares it must reach."""
    text = SPEC_PATH.read_text(encoding="utf-8")
    section = text.split("## Transitions", 1)[1]
    result: dict[str, tuple[str, ...]] = {}
    for line in section.splitlines():
        match = _TRANSITIONS.match(line)
        if match:
            result[match["machine"]] = tuple(_TRANSITION_NAME.findall(match["body"]))
    return result


@lru_cache(maxsize=1)
def load_transition_judges() -> dict[str, dict[str, tuple[str, ...]]]:
    """Machine name -> transition -> the clauses it judges (SPEC.md's "judges ..."): on a
    run with clauses set aside, a clause passes only if every transition that judges it
    was reached (``MIN_TRANSITION_HITS`` times)."""
    text = SPEC_PATH.read_text(encoding="utf-8")
    section = text.split("## Transitions", 1)[1]
    result: dict[str, dict[str, tuple[str, ...]]] = {}
    for line in section.splitlines():
        match = _TRANSITIONS.match(line)
        if match:
            result[match["machine"]] = {
                judged[1]: tuple(judged["clauses"].split(", "))
                for judged in _TRANSITION_JUDGES.finditer(match["body"])
            }
    return result


def mmspec_version() -> str:
    """The project's version, from its one place (pyproject.toml's ``[project]``); a
    copy without it (an installed distribution) reads the same field from its metadata."""
    pyproject = SPEC_PATH.parents[1] / "pyproject.toml"
    if pyproject.is_file():
        return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])
    try:
        return importlib.metadata.version("mmspec")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (no pyproject.toml, mmspec not installed)"


@lru_cache(maxsize=1)
def spec_digest() -> str:
    """A digest of the clause set (each clause's id and statement, in SPEC.md's order):
    two reports with the same digest judged the same clauses."""
    digest = hashlib.sha256()
    for clause in load_clauses().values():
        digest.update(f"{clause.id}\0{clause.statement}\0".encode())
    return digest.hexdigest()[:12]


#: Minimum number of times each declared transition must be reached in ``ci``.
MIN_TRANSITION_HITS = 5

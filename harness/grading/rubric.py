"""Rubrics: TOML files that map graded items (name, points, visibility) to SPEC.md clauses.

A rubric is read once and checked whole before anything runs: every problem (an unknown
clause, a clause in two items, a typo in a key, an undeclared capability) is listed in
one :class:`RubricError`, as the adapter loader does for adapters. The format::

    title = "..."

    [capabilities]            # optional: what an adapter may declare it does not attempt
    is_embed = "what it means"

    [[items]]
    name = "Eviction"
    points = 10
    visibility = "visible"    # Gradescope's: visible, hidden, after_due_date, after_published
    clauses = ["ECM-4", "ECM-5", "ECM-7"]
    description = "..."       # optional
    capabilities = ["..."]    # optional: the item is "not attempted" when the adapter's
                              # ``not_attempted`` names any of them
    autograder_only = true    # optional (default false): graded on the autograder only

A clause belongs to at most one item, so a failure never costs points twice.

``autograder_only`` marks the course's hidden tests: items whose properties need the
reference (``reference/``, or the models and oracles the properties compare with), which
the student kit does not hold (docs/grading.md, "Public and hidden items"). The full
grader grades such an item like any other; the student kit does not run it, and reports
it "needs the reference" (graded on the autograder, 0 points there).
``studentkit/make_kit.py`` marks every item that needs the reference in the kit's public
rubric, whether the course's rubric says so or not.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.names import HOME, INSTALLED
from spec.clauses import Clause, load_clauses

#: The rubric ``make grade`` and the Gradescope bundle use unless told otherwise.
DEFAULT_RUBRIC = HOME / "rubrics" / "default.toml"  # installed: package data

#: Gradescope's visibility settings (its results.json format), in increasing secrecy.
VISIBILITIES: tuple[str, ...] = ("visible", "after_published", "after_due_date", "hidden")

_TOP_KEYS = frozenset({"title", "capabilities", "items"})
_ITEM_KEYS = frozenset(
    {"name", "points", "visibility", "clauses", "description", "capabilities", "autograder_only"}
)


class RubricError(Exception):
    """The rubric cannot be used; ``problems`` lists everything that is wrong."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(problems)
        count = len(self.problems)
        header = f"invalid rubric {source}: {count} problem{'s' if count != 1 else ''}"
        super().__init__("\n".join([header, *(f"  - {p}" for p in self.problems)]))


@dataclass(frozen=True)
class RubricItem:
    """One graded item: all of its clauses must hold for its points."""

    number: int  # 1-based position in the rubric
    name: str
    points: float
    visibility: str
    clauses: tuple[str, ...]
    description: str = ""
    capabilities: frozenset[str] = frozenset()
    #: Graded on the autograder only: the student kit reports it "needs the reference".
    autograder_only: bool = False


@dataclass(frozen=True)
class Rubric:
    title: str
    source: str  # the file it was read from, as given
    items: tuple[RubricItem, ...]
    #: capability name -> what it means
    capabilities: Mapping[str, str]

    @property
    def max_score(self) -> float:
        return sum(item.points for item in self.items)

    def clauses(self) -> tuple[str, ...]:
        """Every clause of every item, in rubric order."""
        return tuple(c for item in self.items for c in item.clauses)


def load_rubric(path: str | Path | None = None) -> Rubric:
    """Read and check the rubric at ``path`` (default: :data:`DEFAULT_RUBRIC`)."""
    target = Path(path) if path is not None else DEFAULT_RUBRIC
    # the default as a checkout names it; installed, its full path (a replay command run
    # from another folder must not read a rubrics/default.toml of that folder's)
    default = str(DEFAULT_RUBRIC) if INSTALLED else "rubrics/default.toml"
    source = str(path) if path is not None else default
    try:
        text = target.read_text(encoding="utf-8")
    except OSError as e:
        raise RubricError(source, [f"cannot read it: {e.strerror or e}"]) from None
    return parse_rubric(text, source)


def parse_rubric(
    text: str, source: str = "<rubric>", clauses: Mapping[str, Clause] | None = None
) -> Rubric:
    """Parse and check a rubric's TOML text against SPEC.md's clauses."""
    known = load_clauses() if clauses is None else clauses
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise RubricError(source, [f"not valid TOML: {e}"]) from None
    problems: list[str] = []
    unknown = sorted(data.keys() - _TOP_KEYS)
    problems += [f"unknown key {k!r} (expected {_keys(_TOP_KEYS)})" for k in unknown]
    title = data.get("title")
    if not isinstance(title, str) or not title.strip():
        problems.append("title must be a non-empty string")
        title = source
    capabilities = _capabilities(data.get("capabilities", {}), problems)
    raw_items = data.get("items")
    if not isinstance(raw_items, list) or not raw_items:
        problems.append("items must be a non-empty array of tables ([[items]])")
        raw_items = []
    items: list[RubricItem] = []
    owner: dict[str, str] = {}
    names: set[str] = set()
    for number, raw in enumerate(raw_items, 1):
        item = _item(number, raw, known, capabilities, problems)
        if item is None:
            continue
        if item.name in names:
            problems.append(f"item {number}: the name {item.name!r} is used twice")
        names.add(item.name)
        for clause in item.clauses:
            if clause in owner:
                problems.append(
                    f"item {number} ({item.name}): {clause} is already graded by "
                    f"{owner[clause]!r}; a clause belongs to one item"
                )
            owner.setdefault(clause, item.name)
        items.append(item)
    if problems:
        raise RubricError(source, problems)
    return Rubric(title=title, source=source, items=tuple(items), capabilities=capabilities)


def _capabilities(raw: object, problems: list[str]) -> dict[str, str]:
    if not isinstance(raw, dict):
        problems.append("capabilities must be a table of name = \"what it means\"")
        return {}
    result: dict[str, str] = {}
    for name, meaning in raw.items():
        if not isinstance(meaning, str):
            problems.append(f"capability {name!r} must be described by a string")
            continue
        result[name] = meaning
    return result


def _item(
    number: int,
    raw: object,
    known: Mapping[str, Clause],
    capabilities: Mapping[str, str],
    problems: list[str],
) -> RubricItem | None:
    if not isinstance(raw, dict):
        problems.append(f"item {number} is not a table")
        return None
    where = f"item {number}"
    unknown = sorted(raw.keys() - _ITEM_KEYS)
    problems += [f"{where}: unknown key {k!r} (expected {_keys(_ITEM_KEYS)})" for k in unknown]
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append(f"{where}: name must be a non-empty string")
        name = f"item {number}"
    where = f"item {number} ({name})"
    points = raw.get("points")
    if isinstance(points, bool) or not isinstance(points, (int, float)):
        problems.append(f"{where}: points must be a number")
        points = 0
    elif not math.isfinite(points) or points < 0:
        problems.append(f"{where}: points must be a finite number >= 0, got {points}")
        points = 0
    visibility = raw.get("visibility", "visible")
    if visibility not in VISIBILITIES:
        problems.append(f"{where}: visibility must be one of {', '.join(VISIBILITIES)}")
        visibility = "visible"
    clause_list = _strings(raw.get("clauses"), f"{where}: clauses", problems)
    if "clauses" not in raw:
        problems.append(f"{where}: clauses is required")
    elif not clause_list:
        problems.append(f"{where}: clauses must name at least one clause")
    for clause in clause_list:
        if clause not in known:
            problems.append(f"{where}: {clause} is not a clause of SPEC.md")
    if len(set(clause_list)) != len(clause_list):
        problems.append(f"{where}: a clause is listed twice")
    description = raw.get("description", "")
    if not isinstance(description, str):
        problems.append(f"{where}: description must be a string")
        description = ""
    needs = _strings(raw.get("capabilities", []), f"{where}: capabilities", problems)
    for capability in needs:
        if capability not in capabilities:
            problems.append(
                f"{where}: capability {capability!r} is not declared in [capabilities]"
            )
    autograder_only = raw.get("autograder_only", False)
    if not isinstance(autograder_only, bool):
        problems.append(f"{where}: autograder_only must be true or false")
        autograder_only = False
    return RubricItem(
        number=number,
        name=name.strip(),
        points=float(points),
        visibility=str(visibility),
        clauses=tuple(clause_list),
        description=description.strip(),
        capabilities=frozenset(needs),
        autograder_only=autograder_only,
    )


def _strings(raw: Any, what: str, problems: list[str]) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
        problems.append(f"{what} must be an array of strings")
        return []
    return list(raw)


def _keys(keys: frozenset[str]) -> str:
    return ", ".join(sorted(keys))

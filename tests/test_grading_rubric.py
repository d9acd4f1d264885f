"""Rubrics: the default one covers SPEC.md as documented; a broken one is refused with
every problem listed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.grading.rubric import (
    DEFAULT_RUBRIC,
    VISIBILITIES,
    RubricError,
    load_rubric,
    parse_rubric,
)
from spec.clauses import load_clauses

GOOD_ITEM = """
[[items]]
name = "Eviction"
points = 10
clauses = ["ECM-5"]
"""


def test_the_default_rubric_grades_every_clause_exactly_once() -> None:
    rubric = load_rubric()
    graded = rubric.clauses()
    assert sorted(graded) == sorted(load_clauses()), "every SPEC.md clause, no other"
    assert len(graded) == len(set(graded)), "a clause belongs to one item"
    assert rubric.max_score == 100
    assert {item.visibility for item in rubric.items} <= set(VISIBILITIES)
    assert rubric.source == "rubrics/default.toml"
    assert DEFAULT_RUBRIC.is_file()


def test_the_default_rubric_opens_with_the_definition_of_done_then_the_lab() -> None:
    items = load_rubric().items
    done = [item for item in items if item.name.startswith("Done ")]
    lab = [item for item in items if item.name.startswith("Lab ")]
    assert [item.number for item in done] == [1, 2, 3, 4]
    assert [item.number for item in lab] == [5, 6, 7, 8, 9, 10]
    by_name = {item.name: item for item in items}
    # The four behaviours of the mini-build's Definition of done (seed 000).
    assert "EXP-1" in by_name["Done 1: expansion arithmetic"].clauses
    assert "HASH-2" in by_name["Done 2: cache sharing by content"].clauses
    assert "SPL-3" in by_name["Done 3: the splice count contract"].clauses
    assert "ECM-5" in by_name["Done 4: eviction"].clauses
    # The lab's doorstep rule and its progress scenario (docs/lab_scenarios.md).
    lab_clauses = {c for item in lab for c in item.clauses}
    assert {"SCH-1", "SCH-2", "SCH-4", "SCH-5", "SCH-7", "SCH-9", "SCH-10"} == lab_clauses


def test_capabilities_are_declared_and_used() -> None:
    rubric = load_rubric()
    used = {c for item in rubric.items for c in item.capabilities}
    assert used == set(rubric.capabilities) == {"is_embed", "chunking", "pixel_arrays"}


def test_a_minimal_rubric_parses() -> None:
    rubric = parse_rubric('title = "t"\n' + GOOD_ITEM)
    (item,) = rubric.items
    assert (item.number, item.name, item.points) == (1, "Eviction", 10.0)
    assert item.visibility == "visible"
    assert item.clauses == ("ECM-5",)
    assert item.autograder_only is False  # graded by the kit too, unless marked


def test_autograder_only_marks_a_hidden_item_and_must_be_a_boolean() -> None:
    rubric = parse_rubric('title = "t"\n' + GOOD_ITEM + "autograder_only = true\n")
    assert rubric.items[0].autograder_only is True
    with pytest.raises(RubricError, match="autograder_only must be true or false"):
        parse_rubric('title = "t"\n' + GOOD_ITEM + 'autograder_only = "yes"\n')


def test_every_problem_of_a_broken_rubric_is_listed_at_once() -> None:
    text = """
title = ""
colour = "blue"

[capabilities]
is_embed = "masks"

[[items]]
name = "A"
points = -1
visibility = "secret"
clauses = ["ECM-5", "NOPE-1", "ECM-5"]
capabilities = ["teleportation"]
typo = 1

[[items]]
name = "A"
points = "ten"
clauses = ["ECM-5"]

[[items]]
name = "C"
points = 1
"""
    with pytest.raises(RubricError) as caught:
        parse_rubric(text, "broken.toml")
    problems = "\n".join(caught.value.problems)
    for expected in (
        "title must be a non-empty string",
        "unknown key 'colour'",
        "points must be a finite number >= 0",
        "visibility must be one of",
        "NOPE-1 is not a clause of SPEC.md",
        "a clause is listed twice",
        "capability 'teleportation' is not declared",
        "unknown key 'typo'",
        "the name 'A' is used twice",
        "points must be a number",
        "ECM-5 is already graded by 'A'",
        "clauses is required",
    ):
        assert expected in problems, f"{expected!r} missing from:\n{problems}"
    assert str(caught.value).startswith("invalid rubric broken.toml: ")


@pytest.mark.parametrize(
    "text, problem",
    [
        ("title = [", "not valid TOML"),
        ('title = "t"', "items must be a non-empty array"),
        ('title = "t"\n[[items]]\nname = "x"\npoints = 1\nclauses = []', "at least one clause"),
    ],
)
def test_structural_problems(text: str, problem: str) -> None:
    with pytest.raises(RubricError, match=problem):
        parse_rubric(text)


def test_a_missing_rubric_file_is_a_rubric_error(tmp_path: Path) -> None:
    with pytest.raises(RubricError, match="cannot read it"):
        load_rubric(tmp_path / "absent.toml")

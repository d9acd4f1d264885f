"""A worker store that keeps its own cache is judged on its gathers only (issue 34).

SGLang's worker keeps no store that the scheduler fills and frees: it looks each item up
in a content-keyed cache of its own and encodes what it misses. Its store declares so
(``spec.components.SelfManagedWorkerStore``), and WRK-1, WRK-2 and WRK-5 are ``not
provided`` for it with the reason, in process and isolated alike; WRK-3 and WRK-4 still
judge its gathers, and catch a wrong one. A store whose ``self_managed()`` is not True is
judged on all five. The reference's engine loop, standing in where the adapter has none,
is given the reference's worker store beside such a store (it takes no frees, and the
loop directs its worker by them): the engine machines judge the rest of the build."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.catalog import registered_properties
from harness.isolation import IsolatedSession, Limits
from harness.loader import build_parts, load_adapter
from harness.runner import Report, Verdict, run_property, verify
from tests.conftest import FIXTURES

FIXTURE = FIXTURES / "self_managed_store.py"
WRK = ("WRK-1", "WRK-2", "WRK-3", "WRK-4", "WRK-5")
NOT_JUDGED = ("WRK-1", "WRK-2", "WRK-5")
REASON = "the worker store keeps its own content-keyed cache (it declares self_managed()"


def _adapter(tmp_path: Path, name: str) -> str:
    """An adapter file whose ``ADAPTER`` is the fixture's ``name``."""
    path = tmp_path / f"{name.lower()}.py"
    path.write_text(f"from tests.fixtures.self_managed_store import {name} as ADAPTER\n")
    return str(path)


def _verdicts(report: Report) -> dict[str, Verdict]:
    return {row.clause: row.verdict for row in report.rows}


def _check_not_judged(report: Report) -> None:
    verdicts = _verdicts(report)
    for clause in NOT_JUDGED:
        assert verdicts[clause] is Verdict.NOT_PROVIDED, (clause, verdicts[clause])
        row = next(r for r in report.rows if r.clause == clause)
        result = report.results[row.property]
        assert REASON in result.detail, result.detail
        assert not result.failures and not result.examples, result
    assert verdicts["WRK-3"] is verdicts["WRK-4"] is Verdict.PASS, verdicts


def test_a_self_managed_store_is_judged_on_its_gathers_only() -> None:
    _check_not_judged(verify(str(FIXTURE), "ci", only=WRK))


def test_the_same_verdicts_isolated() -> None:
    with IsolatedSession(str(FIXTURE), Limits()) as session:
        _check_not_judged(verify(str(FIXTURE), "ci", only=WRK, session=session))


def test_a_store_that_says_false_is_judged_on_all_five(tmp_path: Path) -> None:
    report = verify(_adapter(tmp_path, "SAYS_FALSE"), "ci", only=WRK)
    assert set(_verdicts(report).values()) == {Verdict.PASS}, _verdicts(report)


@pytest.mark.parametrize("isolated", [False, True], ids=["in process", "isolated"])
def test_a_wrong_gather_of_a_self_managed_store_fails_wrk_3(
    tmp_path: Path, isolated: bool
) -> None:
    adapter = _adapter(tmp_path, "SHORT_GATHER")
    only = ("WRK-3", "WRK-4")
    if isolated:
        with IsolatedSession(adapter, Limits()) as session:
            report = verify(adapter, "ci", only=only, session=session)
    else:
        report = verify(adapter, "ci", only=only)
    verdicts = _verdicts(report)
    assert verdicts["WRK-3"] is Verdict.FAIL, verdicts
    assert verdicts["WRK-4"] is Verdict.FAIL, verdicts


@pytest.mark.parametrize("isolated", [False, True], ids=["in process", "isolated"])
def test_the_reference_engine_is_given_the_reference_store_beside_a_self_managed_one(
    isolated: bool,
) -> None:
    """The fixture's store ignores frees: given to the reference's engine loop it would
    hold what the scheduler freed (SYS-5); the loop gets the reference's store instead."""
    only = ("EngineMachine",)
    if isolated:
        with IsolatedSession(str(FIXTURE), Limits()) as session:
            report = verify(str(FIXTURE), "ci", only=only, session=session)
    else:
        report = verify(str(FIXTURE), "ci", only=only)
    assert set(_verdicts(report).values()) == {Verdict.PASS}, _verdicts(report)
    # and its rows name the code they judged: the reference's alone, the fixture's store
    # having been left out of the engine (the WRK rows name the fixture)
    assert report.provenance["worker_store"] == "self_managed_store"
    assert {row.implementations for row in report.rows} == {"reference"}, report.rows


def test_without_the_swap_the_store_would_break_the_engine() -> None:
    """The swap above is what keeps the engine machines passing: the same store given to
    the reference's engine loop directly leaves freed embeddings held (SYS-5)."""
    loaded = load_adapter(str(FIXTURE))
    parts = build_parts(loaded.adapter, load_adapter("reference").adapter)
    assert parts.engine_worker_store is not None
    unswapped = replace(parts, engine_worker_store=None)
    result = run_property(
        registered_properties()["EngineMachine"], unswapped, "ci", "fixture", per_clause=False
    )
    assert result.verdict is Verdict.FAIL
    assert {f.clause for f in result.failures} == {"SYS-5"}, result.failures

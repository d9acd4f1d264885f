"""A crash is never read as "not provided" (issue 32, item 1).

A component is ``not provided`` only where the adapter says so: it lacks the component,
a method raises ``NotImplementedError`` (the template's ``@todo``), or an optional
capability is absent per its Protocol. Anything that raises while a capability is probed
or a property is built is ``ERROR`` with the exception — in process and isolated alike —
and so is a crash on the per-clause reruns (never ``blocked``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from harness.isolation import IsolatedSession, Limits
from harness.report import render
from harness.runner import Report, Verdict, verify
from properties.framework import (
    Parts,
    PropertySpec,
    Runnable,
    TransitionRecorder,
    check,
    is_set_aside,
    machine,
)
from spec.clauses import Clause
from tests.conftest import FIXTURES, run_cli

RAISES = str(FIXTURES / "engine_factory_raises.py")
RETURNS_NONE = str(FIXTURES / "engine_factory_returns_none.py")
RESET_CRASHES = str(FIXTURES / "engine_reset_crashes.py")
WITHOUT_OPTIONAL = str(FIXTURES / "ecm_without_optional_members.py")
GOOD = str(FIXTURES / "good_adapter.py")

#: Every machine that builds the adapter's engine loop; all but the first probe an
#: optional capability of it first.
ENGINE_MACHINES = [
    "EngineMachine",
    "EngineResetMachine",
    "EngineDrafterMachine",
    "EngineAsyncMachine",
    "EngineAsyncDrafterMachine",
]


def _verdicts(report: Report) -> dict[tuple[str, str], Verdict]:
    return {(row.clause, row.property): row.verdict for row in report.rows}


@pytest.mark.parametrize(
    "adapter, says",
    [
        (RAISES, "RuntimeError: create_manager failed: the engine cannot start"),
        (RETURNS_NONE, "the engine_loop factory returned None, which does not meet the EngineLoop"),
    ],
    ids=["factory raises", "factory returns None"],
)
def test_an_engine_that_cannot_be_built_is_an_error_on_every_engine_row(
    adapter: str, says: str
) -> None:
    report = verify(adapter, "ci", ENGINE_MACHINES)
    assert set(_verdicts(report).values()) == {Verdict.ERROR}, render(report)
    assert not report.ok
    for name in ENGINE_MACHINES[1:]:
        (failure,) = report.results[name].failures
        assert failure.message.startswith(f"probing whether {report.adapter_name} provides")
        assert says in failure.message, failure.message
        assert " (at " in failure.message  # where it was raised


def test_verify_exits_non_zero_when_the_reset_machine_cannot_be_built() -> None:
    """Before: every row of EngineResetMachine read `not provided`, and verify exited 0."""
    done = run_cli("verify", "--adapter", RETURNS_NONE, "--profile", "ci",
                   "--only", "EngineResetMachine", timeout=120)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not provided" not in done.stdout
    assert "12 ERROR" in done.stdout


def test_a_capability_whose_probe_crashes_is_an_error_with_the_exception() -> None:
    """The engine has the optional resets, and they raise: not an absent capability."""
    report = verify(RESET_CRASHES, "ci", ["EngineResetMachine"])
    assert set(_verdicts(report).values()) == {Verdict.ERROR}, render(report)
    (failure,) = report.results["EngineResetMachine"].failures
    assert "RuntimeError: the worker's cache lock is gone" in failure.message
    assert "engine_reset_crashes.py" in failure.message


def test_a_capability_the_build_lacks_stays_not_provided_with_its_reason() -> None:
    """The honest absence: a cache manager without ``reset()``, around which the reference
    engine loop says ``NotImplementedError`` when reset."""
    report = verify(WITHOUT_OPTIONAL, "ci", ["EngineResetMachine"])
    assert set(_verdicts(report).values()) == {Verdict.NOT_PROVIDED}, render(report)
    detail = report.results["EngineResetMachine"].detail
    assert "SYS-11: the engine loop's resets are not implemented: the encoder cache manager " \
           "has no reset() (ECM-9)" in detail, detail


@pytest.mark.parametrize(
    "adapter, names, verdict",
    [(RAISES, ENGINE_MACHINES, Verdict.ERROR), (RETURNS_NONE, ENGINE_MACHINES, Verdict.ERROR),
     (RESET_CRASHES, ["EngineResetMachine"], Verdict.ERROR),
     (WITHOUT_OPTIONAL, ["EngineResetMachine"], Verdict.NOT_PROVIDED)],
    ids=["factory raises", "factory returns None", "reset crashes", "no reset"],
)
def test_isolated_and_in_process_give_the_same_verdicts(
    adapter: str, names: list[str], verdict: Verdict
) -> None:
    """Isolated, the probe's engine lives in the child: a factory's exception comes back
    as the implementation's, and a ``None`` engine shows when its snapshot is read."""
    in_process = verify(adapter, "ci", names)
    with IsolatedSession(adapter, Limits()) as session:
        isolated = verify(adapter, "ci", names, session=session)
    assert _verdicts(isolated) == _verdicts(in_process), render(isolated)
    assert set(_verdicts(isolated).values()) == {verdict}, render(isolated)


# --- the runner, on fake properties --------------------------------------------------------


def _clause(clause_id: str) -> Clause:
    return Clause(clause_id, f"title of {clause_id}", "statement", "symptom", "upstream", ())


def _run(spec: PropertySpec, clauses: tuple[str, ...],
         transitions: dict[str, tuple[str, ...]] | None = None) -> Report:
    return verify(GOOD, "ci", registry={spec.name: spec},
                  clauses={c: _clause(c) for c in clauses}, fallback_ref=None,
                  transitions=transitions or {})  # fmt: skip


def _passes(parts: Parts) -> Runnable:
    return Runnable(run=lambda settings: None)


def _with_probe(probe: Callable[[Parts], str | None]) -> PropertySpec:
    return PropertySpec("probed", ("FAKE-1", "FAKE-2"), ("hasher",), (), _passes, __name__,
                        capabilities=(("FAKE-2", probe),))  # fmt: skip


def test_a_probe_that_raises_is_an_error_and_the_property_does_not_run() -> None:
    def probe(parts: Parts) -> str | None:
        return {"present": None}["absent"]  # a crash inside the probe

    report = _run(_with_probe(probe), ("FAKE-1", "FAKE-2"))
    assert [row.verdict for row in report.rows] == [Verdict.ERROR, Verdict.ERROR]
    (failure,) = report.results["probed"].failures
    assert "the optional capability FAKE-2 needs raised KeyError: 'absent' (at " in failure.message


def test_a_raising_probe_shared_by_clauses_names_them_all() -> None:
    def probe(parts: Parts) -> str | None:
        raise RuntimeError("create_manager returned None")

    spec = PropertySpec("probed", ("FAKE-1", "FAKE-2"), ("hasher",), (), _passes, __name__,
                        capabilities=(("FAKE-1", probe), ("FAKE-2", probe)))  # fmt: skip
    report = _run(spec, ("FAKE-1", "FAKE-2"))
    (failure,) = report.results["probed"].failures
    assert "the optional capability FAKE-1 and FAKE-2 need raised RuntimeError" in failure.message


@pytest.mark.parametrize(
    "probe, why",
    [
        (lambda parts: "the hasher does not provide frobnicate()",
         "FAKE-2: the hasher does not provide frobnicate()"),
        (lambda parts: (_ for _ in ()).throw(NotImplementedError("frobnicate: @todo")),
         "FAKE-2: not implemented (NotImplementedError: frobnicate: @todo)"),
    ],
    ids=["the probe says so", "the implementation raises NotImplementedError"],
)
def test_an_absent_capability_is_not_provided_with_its_reason(
    probe: Callable[[Parts], str | None], why: str
) -> None:
    report = _run(_with_probe(probe), ("FAKE-1", "FAKE-2"))
    assert [row.verdict for row in report.rows] == [Verdict.VACUOUS, Verdict.NOT_PROVIDED]
    assert report.results["probed"].detail.startswith(why)


class CrashesOnceFake1IsSetAside(TransitionRecorder, RuleBasedStateMachine):
    """Breaks FAKE-1 on its second tick; on the reruns that set FAKE-1 aside, the
    implementation crashes on that tick instead, where FAKE-1 still holds (a crash only
    the reruns reach), so FAKE-2 is never judged."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    @rule()
    def tick(self) -> None:
        self.reached("tick")
        if self.count >= 1 and is_set_aside("FAKE-1"):
            raise LookupError("the implementation lost its table")
        self.count += 1

    @invariant()
    def fake1(self) -> None:
        check(self.count < 2, "FAKE-1", "counted past one")


def test_a_crash_on_the_per_clause_reruns_is_an_error_not_blocked() -> None:
    spec = PropertySpec("Crashy", ("FAKE-1", "FAKE-2"), ("hasher",), (),
                        lambda parts: machine(CrashesOnceFake1IsSetAside), __name__)  # fmt: skip
    report = _run(spec, ("FAKE-1", "FAKE-2"), {"CrashesOnceFake1IsSetAside": ("tick",)})
    assert [(r.clause, r.verdict) for r in report.rows] == [
        ("FAKE-1", Verdict.FAIL), ("FAKE-2", Verdict.ERROR)
    ], render(report)
    crash = next(f for f in report.results["Crashy"].failures if f.verdict is Verdict.ERROR)
    assert "LookupError: the implementation lost its table" in crash.message
    assert crash.set_aside == ("FAKE-1",)  # its replay sets FAKE-1 aside

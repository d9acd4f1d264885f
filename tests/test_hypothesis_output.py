"""What Hypothesis prints during a run stays with the run (issue 33, item 8).

Hypothesis ``report()``s some things instead of attaching them to the error — the steps
before a ``FlakyStrategyDefinition`` in a state machine ("Steps leading up to this
error"), a replayed test case's narration. Left to its default reporter they reach the
user's terminal beside mmspec's report, also under ``grade --quiet``; the runner keeps
them for the failure they belong to, and a reporter of the caller's own still hears them.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.reporting import report, with_reporter

from harness.runner import Verdict, _kept, verify
from properties.framework import Parts, Runnable, stateless
from tests.test_runner import GOOD, clause, prop


def test_what_hypothesis_prints_is_kept_and_a_callers_reporter_still_hears_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    printed: list[str] = []
    with _kept(printed):
        report("Steps leading up to this error:\n  state.step()")
    assert printed == ["Steps leading up to this error:", "  state.step()"]
    heard: list[object] = []
    with with_reporter(heard.append), _kept(printed):
        report("the narration")
    assert heard == ["the narration"]
    assert capsys.readouterr() == ("", "")


def _prints_then_crashes(parts: Parts) -> Runnable:
    @given(st.just(0))
    def test(x: int) -> None:
        report("Steps leading up to this error:\n  state.step()")
        raise KeyError(x)

    return stateless(test)


def test_a_run_prints_nothing_of_hypothesis_beside_the_report(
    capfd: pytest.CaptureFixture[str],
) -> None:
    result = verify(
        GOOD, "ci", registry={"noisy": prop("noisy", ("FAKE-1",), _prints_then_crashes)},
        clauses={"FAKE-1": clause("FAKE-1", "noisy")}, fallback_ref=None, transitions={},
    )
    assert [row.verdict for row in result.rows] == [Verdict.ERROR]
    out, err = capfd.readouterr()
    assert "Steps leading up" not in out + err

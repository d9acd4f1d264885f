"""Every zoo entry is killed by the property it names, by a failed clause assertion.

A zoo entry (``adapters/zoo/<name>.py``) is a deliberately buggy implementation that
declares ``BREAKS`` (the clause it violates), ``KILLED_BY`` (the property that must
catch it), ``ORIGIN`` and ``ADAPTER`` (:mod:`harness.zoo` reads them). The ``ci``
profile's search must find a failure of ``BREAKS`` first — a
:class:`~properties.framework.ClauseViolation`, not an exception escaping the adapter
(that would be ERROR) nor another clause.

The search is run as the ``mutation`` profile runs it: ``ci``'s settings without the
shrink phase (derandomized from the same test, the same example and step counts), so it
draws exactly ``ci``'s test cases up to the first failure and stops there. That failure
is the ``ci`` report's too: shrinking replaces each failure by a smaller one of the same
*interesting origin*, and each clause raises its own exception type
(:class:`~properties.framework.ClauseViolation`), so a failure of ``BREAKS`` is never
shrunk into another clause's. Shrinking was 96 % of this file's time (645 of 670 CPU s,
docs/verdict_cost.md, "tenth session"); shrunk counterexamples are what the grading tests
check (tests/test_grading_reproducer_verified.py, tests/test_per_clause.py).

The reference must pass every property that kills something, or the kill proves
nothing: tests/test_grading.py checks that in the reference's ``ci`` grade, which runs
every property as ``verify`` does (one run, not two). ``make test`` also prints the kill
matrix (:mod:`harness.kill_matrix`): every property against every entry it can see.
"""

from __future__ import annotations

import pytest
from hypothesis import Phase

from harness.profiles import profile_settings
from harness.report import render
from harness.runner import Verdict, verify
from harness.zoo import ZooEntry, discover

#: ``ci``'s search up to its first failure (the module docstring says why it is that).
CI_SEARCH = "mutation"

ENTRIES = discover()
RUNNABLE = [e for e in ENTRIES if e.needs is None]


def _needs(module: str) -> str:
    """Why an entry is skipped, and what installs what it needs."""
    how = "run `make torch` (the torch extra)" if module.split(".")[0] == "torch" else (
        f"install {module.split('.')[0]} into .venv"
    )
    return f"needs {module}, not installed: {how}"


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(
            e,
            id=e.short_name,
            marks=[pytest.mark.skip(reason=_needs(e.needs))] if e.needs else [],
        )
        for e in ENTRIES
    ],
)
def test_zoo_entry_is_killed_by_its_property(entry: ZooEntry) -> None:
    report = verify(entry.module, CI_SEARCH, only=[entry.killed_by], per_clause=False)
    rows = [r for r in report.rows if r.property == entry.killed_by]
    assert rows, f"{entry.module}: KILLED_BY names {entry.killed_by}, which is not registered"
    verdicts = {r.clause: r.verdict for r in rows}
    assert entry.breaks in verdicts, (
        f"{entry.module}: {entry.killed_by} does not check {entry.breaks} "
        f"(it checks {', '.join(verdicts)})"
    )
    assert verdicts[entry.breaks] is Verdict.FAIL, render(report)
    result = report.results[entry.killed_by]
    assert [f.clause for f in result.failures] == [entry.breaks], render(report)


def test_the_ci_search_is_ci_without_the_shrink() -> None:
    """What makes the ``mutation`` run above ``ci``'s search: every setting the same but
    the phases, which are ``ci``'s less the shrink."""
    ci, search = profile_settings("ci"), profile_settings(CI_SEARCH)
    # reuse replays the example database, and neither has one
    assert set(ci.phases) - set(search.phases) == {Phase.shrink, Phase.reuse}
    assert set(search.phases) <= set(ci.phases)
    assert ci.database is None and search.database is None
    for name in ("max_examples", "stateful_step_count", "derandomize", "backend"):
        assert getattr(search, name) == getattr(ci, name), name

"""Every zoo entry is killed by the property it names, by a failed clause assertion.

A zoo entry (``adapters/zoo/<name>.py``) is a deliberately buggy implementation that
declares ``BREAKS`` (the clause it violates), ``KILLED_BY`` (the property that must
catch it), ``ORIGIN`` and ``ADAPTER`` (:mod:`harness.zoo` reads them). Running
``KILLED_BY`` against it in the ``ci`` profile must give FAIL on ``BREAKS`` — a
:class:`~properties.framework.ClauseViolation`, not an exception escaping the adapter
(that would be ERROR). And the reference must pass every property that kills something,
or the kill proves nothing: tests/test_grading.py checks that in the reference's ``ci``
grade, which runs every property as ``verify`` does (one run, not two). ``make test``
also prints the kill matrix (:mod:`harness.kill_matrix`): every property against every
entry it can see.
"""

from __future__ import annotations

import pytest

from harness.report import render
from harness.runner import Verdict, verify
from harness.zoo import ZooEntry, discover

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
    report = verify(entry.module, "ci", only=[entry.killed_by], per_clause=False)
    rows = [r for r in report.rows if r.property == entry.killed_by]
    assert rows, f"{entry.module}: KILLED_BY names {entry.killed_by}, which is not registered"
    verdicts = {r.clause: r.verdict for r in rows}
    assert entry.breaks in verdicts, (
        f"{entry.module}: {entry.killed_by} does not check {entry.breaks} "
        f"(it checks {', '.join(verdicts)})"
    )
    assert verdicts[entry.breaks] is Verdict.FAIL, render(report)
    result = report.results[entry.killed_by]
    assert any(f.clause == entry.breaks for f in result.failures), render(report)

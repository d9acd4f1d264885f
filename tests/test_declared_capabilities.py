"""A capability an engine lacks is declared, and reported ``not provided`` with its
reason, never ``ERROR`` (issue 32, item 2).

SGLang has no marker-injection path and no per-block extra keys. Its adapter once raised
``NotImplementedError`` from ``inject`` and ``block_extra_keys``, and SPL-5, DIFF-2 and
PFX-3 came out ``ERROR`` — read as a crash. Both are optional capabilities now
(``spec.components.InjectingSplice``, ``BlockExtraKeys``): a component without the member
declares the absence, in process and isolated alike, and the clauses that need it say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.isolation import IsolatedSession, Limits
from harness.runner import Report, Verdict, verify
from tests.conftest import FIXTURES, ROOT

ADAPTER = str(FIXTURES / "without_injection_or_extra_keys.py")

#: clause -> the words its reason must carry
REASONS = {
    "SPL-5": "the splice does not provide the optional inject() (SPL-5)",
    "DIFF-2": "the splice does not provide the optional inject() (DIFF-2)",
    "PFX-3": "the block hasher does not provide the optional block_extra_keys() (PFX-3)",
}
#: Clauses of the same components that need no optional capability: still judged.
JUDGED = ("SPL-1", "DIFF-3", "PFX-4")


def _check(report: Report) -> None:
    rows = {row.clause: row for row in report.rows}
    for clause, reason in REASONS.items():
        row = rows[clause]
        assert row.verdict is Verdict.NOT_PROVIDED, (clause, row.verdict)
        assert reason in report.results[row.property].detail
    for clause in JUDGED:
        assert rows[clause].verdict is Verdict.PASS, (clause, rows[clause].verdict)


def test_missing_inject_and_extra_keys_are_not_provided_with_the_reason() -> None:
    _check(verify(ADAPTER, profile="ci", only=[*REASONS, *JUDGED]))


def test_the_same_verdicts_isolated() -> None:
    with IsolatedSession(ADAPTER, Limits()) as session:
        _check(verify(ADAPTER, profile="ci", only=[*REASONS, *JUDGED], session=session))


@pytest.mark.parametrize(
    "declared", sorted((ROOT / "adapters" / "sglang" / "expected").glob("*.json")), ids=str
)
def test_sglang_declares_no_error_for_what_it_has_no_code_for(declared: Path) -> None:
    """The pinned releases' declarations (``make verify-sglang-ci`` holds each run to
    them): a capability SGLang lacks is ``not provided``, with its reason."""
    data = json.loads(declared.read_text(encoding="utf-8"))
    for row in data["no_equivalent"]:
        assert row["verdict"] == "not provided", row
        assert row["why"], row

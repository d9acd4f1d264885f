"""PFX-7 draws only the kinds of identity a block hasher's ``identity_kinds()`` names
(``spec.components.KindLimitedIdentityBlockHasher``): an engine that refuses prompt
embeddings while prefix caching is on (SGLang) is judged on the kinds it serves, a
hasher that refuses them without saying so is an ERROR, and a kind ``PrefixIdentity``
does not have is an ERROR too. Without ``identity_kinds()`` every kind is drawn, as
before (the reference's and every zoo entry's runs are unchanged)."""

from __future__ import annotations

from harness.grading.grade import grade
from harness.grading.rubric import load_rubric
from harness.isolation import IsolatedSession, Limits
from harness.report import render
from harness.runner import Verdict, verify
from tests.conftest import FIXTURES

ONLY = ["PFX-7", "PFX-8"]


def _verdicts(name: str) -> dict[str, Verdict]:
    report = verify(str(FIXTURES / name), "ci", ONLY)
    return {row.clause: row.verdict for row in report.rows}


def test_the_kinds_a_hasher_names_are_the_kinds_drawn() -> None:
    assert _verdicts("identity_kinds_limited.py") == {"PFX-7": Verdict.PASS, "PFX-8": Verdict.PASS}


def test_the_report_says_which_kinds_were_left_out() -> None:
    """A pass on the kinds drawn is not a pass on every kind: the report names what the
    hasher's identity_kinds() left out, beside the verdict, isolated or not; a hasher
    that serves every kind gets no such line."""
    ref = str(FIXTURES / "identity_kinds_limited.py")
    expected = (
        "pfx_every_identity_kind_keys (PFX-7): drew lora, cache_salt only: the block "
        "hasher's identity_kinds() leaves out prompt_embeds, which its engine's prefix "
        "cache does not serve"
    )
    for session in (None, IsolatedSession(ref, Limits())):
        report = verify(ref, "ci", ["PFX-7"], session=session)
        assert report.results["pfx_every_identity_kind_keys"].verdict is Verdict.PASS
        text = render(report)
        assert f"== judged on what the adapter serves ==\n{expected}\n" in text, text
    whole = render(verify("reference", "ci", ["PFX-7"]))
    assert "judged on what the adapter serves" not in whole, whole
    graded = grade(ref, load_rubric(None), "ci", only=["PFX-7"])
    (item,) = graded.items
    assert item.summary.endswith(f"; {expected}"), item.summary


def test_refusing_a_kind_without_naming_the_others_is_an_error() -> None:
    assert _verdicts("identity_kinds_silent.py")["PFX-7"] == Verdict.ERROR


def test_a_kind_prefix_identity_lacks_is_an_error() -> None:
    report = verify(str(FIXTURES / "identity_kinds_unknown.py"), "ci", ["PFX-7"])
    (row,) = report.rows
    assert row.verdict == Verdict.ERROR
    (failure,) = report.results["pfx_every_identity_kind_keys"].failures
    assert "'tenant'" in failure.message, failure.message


def test_the_kinds_reach_the_grader_from_an_isolated_child() -> None:
    """``identity_kinds`` is an extension member the child reports (harness/isolation/
    extensions.py): the grader's proxy offers it, so the isolated run draws the same
    kinds as the run in process."""
    ref = str(FIXTURES / "identity_kinds_limited.py")
    report = verify(ref, "ci", ONLY, session=IsolatedSession(ref, Limits()))
    assert {row.clause: row.verdict for row in report.rows} == {
        "PFX-7": Verdict.PASS,
        "PFX-8": Verdict.PASS,
    }

"""The grader: the reference scores full marks, a zoo entry fails the items of its bug with
a readable minimal counterexample and a reproducer, the unfilled template scores zero
with "not provided" items, capabilities not attempted are not run, seeds give
different but repeatable runs, and the command line behaves."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.catalog import registered_properties
from harness.grading.formats import FORMATS, render
from harness.grading.grade import SECRET_SEED, GradeReport, ItemStatus, grade
from harness.grading.rubric import Rubric, load_rubric
from harness.loader import build_parts, load_adapter
from harness.runner import Verdict, run_property
from harness.zoo import discover
from mmspec import __main__ as launcher
from properties.framework import Parts, PropertySpec, Runnable, stateless
from spec.adapter import COMPONENTS
from tests.conftest import ROOT, run_cli

RUBRIC = load_rubric()


def _by_number(report: GradeReport) -> dict[int, Any]:
    return {result.item.number: result for result in report.items}


def _provided(adapter_ref: str) -> set[str]:
    adapter = load_adapter(adapter_ref)
    return {name for name, _protocol in COMPONENTS if adapter.provides(name)}


# --- the reference and the template ---------------------------------------------------


def test_the_reference_scores_full_marks_and_passes_every_property_that_kills() -> None:
    """Full marks in ``ci``; and since the rubric holds every clause, this one grade runs
    every property, each as ``verify --profile ci`` runs it, so it is also the check that
    the reference passes every property that kills a zoo entry (else the kill proves
    nothing, tests/test_zoo.py): passed, and never vacuous (a warning)."""
    report = grade("reference", RUBRIC, "ci", progress=None)
    assert report.score == report.max_score == 100, render(report, "text")
    assert {r.status for r in report.items} == {ItemStatus.PASSED}
    assert not report.warnings and report.load_error is None
    assert all(r.examples > 0 and not r.failures for r in report.items)
    killers = {entry.killed_by for entry in discover() if entry.needs is None}
    ran = {name for result in report.items for name in result.properties}
    assert killers and killers <= ran, sorted(killers - ran)


def test_the_unfilled_template_scores_zero_with_every_item_not_provided() -> None:
    report = grade("adapters/template", RUBRIC, "ci")
    assert report.load_error is None
    assert report.score == 0
    assert {r.status for r in report.items} == {ItemStatus.NOT_PROVIDED}
    assert all("does not provide" in r.summary and not r.failures for r in report.items)
    for name in FORMATS:  # and every format renders it
        assert render(report, name)


def test_a_half_filled_component_is_not_provided_until_it_is_finished(tmp_path: Path) -> None:
    adapter = tmp_path / "half.py"
    adapter.write_text(
        "from dataclasses import replace\n"
        "from adapters.template.adapter import ADAPTER, Encoder\n"
        "from reference.encoder import Encoder as Reference\n"
        "class MyEncoder(Encoder):\n"
        "    def __init__(self, hidden_size):\n"
        "        super().__init__(hidden_size)\n"
        "        self._inner = Reference(hidden_size)\n"
        "    @property\n"
        "    def num_calls(self):\n"
        "        return self._inner.num_calls\n"
        "    def encode(self, image, num_embeds):\n"
        "        return self._inner.encode(image, num_embeds)\n"
        "ADAPTER = replace(ADAPTER, name='half', encoder=MyEncoder)\n"
    )
    report = grade(str(adapter), RUBRIC, "ci", only=["ENC-1"])
    (toy_encoder,) = report.items
    assert toy_encoder.status is ItemStatus.NOT_PROVIDED, render(report, "text")
    assert "not implemented yet" in toy_encoder.summary
    assert "encode_batch" in toy_encoder.summary


# --- zoo entries: exactly the items of their bug ---------------------------------------

#: One entry per stateless family, graded on the whole rubric; and a state machine's,
#: graded on the items of its machine only (the engine machine, which every cache manager
#: also drives, would triple the time; the sweep in the report covers the whole zoo).
ZOO_SAMPLE: tuple[tuple[str, tuple[str, ...] | None], ...] = (
    ("exp_toy_ceil", None),
    ("hash_by_length", None),
    ("spl_broadcast_single_row", None),
    ("enc_counts_batches", None),
    ("ecm_counts_entries", ("EncoderCacheMachine",)),
)


@pytest.mark.parametrize("name, only", ZOO_SAMPLE, ids=[name for name, _ in ZOO_SAMPLE])
def test_a_zoo_entry_fails_the_items_of_its_bug(name: str, only: tuple[str, ...] | None) -> None:
    module = importlib.import_module(f"adapters.zoo.{name}")
    ref = f"adapters/zoo/{name}.py"
    report = grade(ref, RUBRIC, "ci", only=only)
    text = render(report, "text")
    items = _by_number(report)
    provided = _provided(ref)
    registry = registered_properties()

    # The item holding the broken clause fails, on that clause.
    (home,) = [r for r in report.items if module.BREAKS in r.item.clauses]
    assert home.status is ItemStatus.FAILED, text
    failure = next(f for f in home.failures if f.clause == module.BREAKS)
    assert failure.steps and failure.steps[0].startswith("1. "), "numbered steps"
    assert f"--only {failure.property_name}" in failure.replay_command
    assert failure.reproducer is not None, failure.reproducer_note
    verification = failure.reproducer.verification
    assert verification is not None and verification.reproduces, verification
    assert "the specification expects" in verification.detail or "raised" in verification.detail

    # Every other verdict follows from what the entry provides: the reference passes every
    # item (test above), and the entry is the reference plus one bug, so an item fails
    # only through the buggy component, by a clause violation, never by a crash.
    for result in report.items:
        subjects = {c for p in result.properties for c in registry[p].subject}
        if result.status is ItemStatus.FAILED:
            assert subjects & provided, f"item {result.item.number} fails without the bug"
            assert all(f.clause is not None for f in result.failures), text
        elif not subjects & provided:
            assert result.status is ItemStatus.NOT_PROVIDED, result
    passed = [r for r in items.values() if r.status is ItemStatus.PASSED]
    assert report.score == sum(r.item.points for r in passed)


# --- capabilities, crashes, malformed adapters -----------------------------------------


def test_capabilities_not_attempted_are_neither_run_nor_failed(tmp_path: Path) -> None:
    adapter = tmp_path / "partial.py"
    adapter.write_text(
        "from dataclasses import replace\n"
        "from reference.adapter import ADAPTER as REFERENCE\n"
        "ADAPTER = replace(REFERENCE, name='no-masks',\n"
        "                  not_attempted=frozenset({'is_embed', 'teleportation'}))\n"
    )
    report = grade(str(adapter), RUBRIC, "ci", only=["EXP-10", "WRK-3", "WRK-1"])
    statuses = {r.item.name: r.status for r in report.items}
    assert statuses == {
        "Row-break ranges (is_embed)": ItemStatus.NOT_ATTEMPTED,
        "Worker store: drop, store, serve": ItemStatus.PASSED,
        "Worker store: is_embed gathers": ItemStatus.NOT_ATTEMPTED,
    }
    for result in report.items:
        if result.status is ItemStatus.NOT_ATTEMPTED:
            assert result.score == 0 and not result.properties and "is_embed" in result.summary
    assert any("teleportation" in w for w in report.warnings)


def test_a_crash_is_reported_without_the_graders_traceback(tmp_path: Path) -> None:
    adapter = tmp_path / "crashing.py"
    adapter.write_text(
        "from spec.adapter import Adapter\n"
        "from reference.splice import Splice\n"
        "class Crashing(Splice):\n"
        "    def merge(self, inputs_embeds, mm_embeds, is_multimodal):\n"
        "        raise RuntimeError('out of shared memory')\n"
        "ADAPTER = Adapter(name='crashing', splice=Crashing)\n"
    )
    report = grade(str(adapter), RUBRIC, "ci", only=["SPL-1"])
    (item,) = report.items
    assert item.status is ItemStatus.FAILED
    assert item.failures and all(f.clause is None for f in item.failures)
    assert "RuntimeError: out of shared memory" in item.failures[0].message
    for name in FORMATS:
        text = render(report, name)
        assert "Traceback (most recent call last)" not in text
        assert not re.search(r"\bat properties/", text), name


def test_a_malformed_adapter_scores_zero_and_says_why(fixtures_dir: Path) -> None:
    report = grade(str(fixtures_dir / "missing_method.py"), RUBRIC, "ci")
    assert report.load_error is not None and "lacks method" in report.load_error
    assert report.score == 0
    assert {r.status for r in report.items} == {ItemStatus.NOT_PROVIDED}
    assert "could not be loaded" in render(report, "gradescope")


# --- seeds and determinism -------------------------------------------------------------


def _drawing_property(seen: list[int]) -> PropertySpec:
    def build(parts: Parts) -> Runnable:
        @given(st.integers(0, 2**32))
        def test(n: int) -> None:
            seen.append(n)

        return stateless(test)

    return PropertySpec("draws", ("HASH-1",), ("hasher",), (), build, __name__)


def _draws(seed: int | None) -> list[int]:
    seen: list[int] = []
    parts = build_parts(load_adapter("reference").adapter, None)
    result = run_property(_drawing_property(seen), parts, "ci", "x", seed=seed)
    assert result.verdict is Verdict.PASS
    return seen


def test_a_seed_gives_a_different_but_repeatable_run() -> None:
    assert _draws(None) == _draws(None), "derandomized by default"
    assert _draws(7) == _draws(7), "the same seed, the same test cases"
    assert _draws(7) != _draws(8) != _draws(None), "another seed, other test cases"


_TIMINGS = re.compile(
    r'( in \d+\.\d s| \d+\.\d s\)|"(execution_time|seconds)": [\d.]+|time="[\d.]+"'
    r'|timestamp="[^"]+"|_Graded in [\d.]+ s\._)'
)


def _without_timings(text: str) -> str:
    return _TIMINGS.sub("<t>", text)


def test_the_same_seed_gives_identical_reports_and_a_hidden_seed_stays_hidden() -> None:
    ref = "adapters/zoo/hash_by_length.py"
    first = grade(ref, RUBRIC, "ci", seed=424242, only=["HASH-2"], hide_seed=True)
    second = grade(ref, RUBRIC, "ci", seed=424242, only=["HASH-2"], hide_seed=True)
    assert first.score == second.score
    for name in FORMATS:
        a, b = render(first, name), render(second, name)
        assert _without_timings(a) == _without_timings(b), name
        assert "424242" not in a, f"{name} shows the hidden seed"
    failure = next(f for r in first.items for f in r.failures)
    assert f"--seed {SECRET_SEED}" in failure.replay_command


# --- the command line ------------------------------------------------------------------


def test_the_command_line_grades_writes_reports_and_reproducers(tmp_path: Path) -> None:
    out, folder = tmp_path / "report.json", tmp_path / "repro"
    done = run_cli(
        "grade", "adapters/zoo/hash_by_length.py", "--profile", "ci", "--only", "HASH-2",
        "--format", "json", "--out", str(out), "--reproducers", str(folder),
    )
    assert done.returncode == 1, done.stderr  # points lost
    assert re.search(r"\[grade\] \[\d+/\d+\] hash_same_length_different_bytes: FAIL", done.stderr)
    assert '"status": "failed"' in out.read_text()
    (script,) = folder.glob("repro_*.py")
    run = [sys.executable, str(script)]
    buggy = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert buggy.returncode == 1 and "REPRODUCED: step 2" in buggy.stderr, buggy.stderr
    fixed = subprocess.run([*run, "reference"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert fixed.returncode == 0, fixed.stderr


def test_the_command_line_exit_statuses(tmp_path: Path, fixtures_dir: Path) -> None:
    full = run_cli("grade", "reference", "--profile", "ci", "--only", "EXP-6", "--quiet")
    assert full.returncode == 0, full.stderr
    assert "mmspec grade: 10/10" in full.stdout
    unknown = run_cli("grade", "reference", "--only", "NOPE-9")
    assert unknown.returncode == 2 and "NOPE-9" in unknown.stderr
    out = tmp_path / "results.json"
    malformed = run_cli("grade", str(fixtures_dir / "wrong_arity.py"), "--format", "gradescope",
                     "--out", str(out), "--quiet")
    assert malformed.returncode == 2
    assert '"score": 0' in out.read_text(), "an autograder still gets a result"
    bad_rubric = tmp_path / "bad.toml"
    bad_rubric.write_text('title = "x"\n')
    assert run_cli("grade", "reference", "--rubric", str(bad_rubric)).returncode == 2


def test_the_console_script_launcher_finds_the_checkout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert not launcher.INSTALLED
    assert launcher.find_checkout() == ROOT
    assert launcher.main(["list"]) == 0
    assert "EXP-1" in capsys.readouterr().out
    monkeypatch.setenv("MMSPEC_HOME", str(tmp_path))  # not a checkout: falls back
    assert launcher.find_checkout() == ROOT


def test_grading_only_a_subset_of_a_rubric(tmp_path: Path) -> None:
    rubric_file = tmp_path / "lab.toml"
    rubric_file.write_text(
        'title = "lab"\n[[items]]\nname = "toy rule"\npoints = 3\nclauses = ["EXP-6"]\n'
    )
    rubric: Rubric = load_rubric(rubric_file)
    report = grade("reference", rubric, "ci")
    assert [r.status for r in report.items] == [ItemStatus.PASSED]
    assert report.score == report.max_score == 3

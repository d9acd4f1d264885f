"""Reproducers are verified before they are claimed (issue 19).

The grader runs every reproducer it writes against the graded adapter, through the
grading child's limits, and the report says "reproduces the failure on its own" only
when the script ends in REPRODUCED. Here: every reproducer the grader writes for a
sample of zoo entries that lose points, and for a build without an engine loop (the
reference's stands in), ends in REPRODUCED when run from a folder outside the checkout
with no MMSPEC_HOME and no PYTHONPATH; a script that does not reproduce is not claimed
to, and what it printed reaches the report bounded and escaped.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.grading.formats import render
from harness.grading.formats.common import reproducer_outcome, run_line
from harness.grading.grade import GradeReport, grade
from harness.grading.reproducer import Verification, _runtime_source, verify_script
from harness.grading.rubric import load_rubric
from harness.isolation import Limits
from tests.conftest import once_across_workers

ROOT = Path(__file__).resolve().parents[1]
RUBRIC = load_rubric(None)

#: (zoo entry, properties to grade it on): entries that lose points, each on the
#: property that kills it, and sch_duplicate_encoded_twice — a scheduling hook only, no
#: engine loop — on the engine machine too, where the reference engine stands in;
#: sys_reencodes_held brings its own engine loop (checked against its graded run), and
#: worker_returns_view fails only through the caller's writes into what it returned;
#: enc_seeded_by_identity keys by id(), so equal content must be distinct objects in the
#: script as it was in the child; sch_rollback_cuts_previous_image fails on an explicit
#: @example (no replay blob). Every zoo entry was measured the same way
#: (docs/grading.md, "What a reproducer guarantees").
SAMPLE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("hash_no_shape", ("hash_array_dtype_and_shape",)),
    ("spl_broadcast_single_row", ("SPL-4",)),
    ("sch_truncate_one_early", ("sch_doorstep_truncation",)),
    ("pfx_no_offset", ("pfx_moving_image_changes_hashes",)),
    ("ecm_newest_first_eviction", ("EncoderCacheMachine",)),
    ("sch_duplicate_encoded_twice", ("EngineMachine",)),
    ("sys_reencodes_held", ("EngineMachine",)),
    ("worker_returns_view", ("wrk_gather_selects_embed_rows",)),
    ("enc_seeded_by_identity", ("enc_deterministic_by_content",)),
    ("sch_rollback_cuts_previous_image", ("sch_no_partial_item_when_disabled",)),
)


def _run_outside(script: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run a reproducer as a student would, from ``folder`` (outside the checkout),
    with neither MMSPEC_HOME nor PYTHONPATH set."""
    env = {k: v for k, v in os.environ.items() if k not in ("MMSPEC_HOME", "PYTHONPATH")}
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@functools.cache
def _graded(name: str, only: tuple[str, ...]) -> GradeReport:
    """Graded once per test run, also when the tests reading one entry's grade run on
    two xdist workers (an isolated engine item takes minutes)."""

    def run() -> GradeReport:
        return grade(f"adapters.zoo.{name}", RUBRIC, "ci", only=only, isolation=Limits())

    return once_across_workers(f"graded {name} {','.join(only)}", run)


#: Entries whose failing calls the reference cannot replay (methods it lacks): checked
#: against what they gave when graded. They need the torch extra (`make torch`).
TORCH_SAMPLE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch_bf16_truncation", ("diff_injection_matches_oracle",)),
    ("torch_batched_gemm", ("diff_encode_batch_invariant",)),
)


@pytest.mark.parametrize("name, only", TORCH_SAMPLE, ids=[name for name, _ in TORCH_SAMPLE])
def test_a_method_the_reference_lacks_reproduces_by_its_graded_result(
    name: str, only: tuple[str, ...], tmp_path: Path
) -> None:
    pytest.importorskip("torch", reason="torch is not installed: run `make torch` (its extra)")
    test_every_reproducer_written_ends_in_reproduced_from_outside_the_checkout(
        name, only, tmp_path
    )
    failure = next(f for result in _graded(name, only).items for f in result.failures)
    assert failure.reproducer is not None and failure.reproducer.verification is not None
    assert "gave again what it gave when graded" in failure.reproducer.verification.detail


@pytest.mark.parametrize("name, only", SAMPLE, ids=[name for name, _ in SAMPLE])
def test_every_reproducer_written_ends_in_reproduced_from_outside_the_checkout(
    name: str, only: tuple[str, ...], tmp_path: Path
) -> None:
    assert not tmp_path.resolve().is_relative_to(ROOT)
    report = _graded(name, only)
    text = render(report, "text")
    failures = [f for result in report.items for f in result.failures]
    assert failures, f"{name} lost no points:\n{text}"
    written = 0
    for failure in failures:
        reproducer = failure.reproducer
        assert reproducer is not None, failure.reproducer_note
        verification = reproducer.verification
        assert verification is not None and verification.reproduces, (name, verification)
        script = tmp_path / reproducer.filename
        script.write_text(reproducer.script, encoding="utf-8")
        done = _run_outside(script, tmp_path)
        assert done.returncode == 1, (name, done.stdout[-2000:], done.stderr[-2000:])
        assert "\nREPRODUCED: step " in done.stderr, done.stderr[-2000:]
        last = done.stderr.rsplit("\nREPRODUCED: ", 1)[1]
        assert last.startswith(f"step {verification.step}:"), (last, verification)
        written += 1
    assert "it reproduces the failure on its own" in text
    assert written


def test_a_build_without_an_engine_loop_is_not_blamed_for_the_reference() -> None:
    """The engine machine's SYS-9 probe (an EngineConfig with token_budget 0 must raise)
    replays inside an expectation, and an exception raised inside the reference engine
    standing in for the missing engine loop is never "your implementation raised"."""
    report = _graded("sch_duplicate_encoded_twice", ("EngineMachine",))
    failures = [f for result in report.items for f in result.failures]
    scripts = [f.reproducer.script for f in failures if f.reproducer is not None]
    assert scripts
    probes = [s for s in scripts if "token_budget=0" in s]
    assert probes, "the SYS-9 configuration probe is part of the minimal example"
    for script in probes:
        line = next(li for li in script.splitlines() if "token_budget=0" in li)
        assert line.startswith("with raises("), line
    errors = [f for f in failures if f.clause is None and f.reproducer is not None]
    assert errors, "the failure is an exception (raised inside the reference engine)"
    assert any(
        f.reproducer is not None
        and f.reproducer.verification is not None
        and f.reproducer.verification.by_stand_in
        for f in errors
    ), "the reference engine raised on what the hook gave it"
    for failure in errors:
        assert failure.reproducer is not None
        verification = failure.reproducer.verification
        assert verification is not None and verification.reproduces
        if verification.by_stand_in:
            assert not failure.message.startswith("implementation raised"), failure.message
            assert "stands in for a component your adapter does not provide" in (
                verification.detail
            )
    text = render(report, "text")
    assert "EngineConfig.token_budget must be an int" not in text.split("expected vs")[-1]


def test_an_own_engine_loop_reproduces_by_giving_its_graded_result_again() -> None:
    """SPEC.md fixes invariants for an engine loop, not one schedule: each of its calls is
    checked against what it gave when graded, and the call after which the grader found
    the violation, giving the same again, is the reproduction, with the finding."""
    report = _graded("sys_reencodes_held", ("EngineMachine",))
    failure = next(f for result in report.items for f in result.failures)
    assert failure.reproducer is not None and failure.reproducer.verification is not None
    script, verification = failure.reproducer.script, failure.reproducer.verification
    assert "with as_graded(" in script and "with check(" in script
    assert "gave again what it gave when graded" in verification.detail
    assert f"which the grader judged: {failure.clause}: " in verification.detail


def test_the_callers_writes_are_replayed() -> None:
    """WRK-3: the caller owns what it was given and may reuse what it handed over; the
    script makes the property's writes, so an aliasing store fails there too."""
    report = _graded("worker_returns_view", ("wrk_gather_selects_embed_rows",))
    failure = next(f for result in report.items for f in result.failures)
    assert failure.reproducer is not None
    script = failure.reproducer.script
    assert "[...] = -1.0  # the caller writes into a result it was given" in script
    assert "[...] = -2.0  # the caller writes into a buffer it handed over" in script


# --- a script that does not reproduce is not claimed to -------------------------------


def _as_graded_script(gives: int) -> str:
    """A script whose one engine step gave 1 when graded, and gives ``gives`` now."""
    return "\n".join(
        [
            _runtime_source(),
            "install()",
            "with as_graded(1, 'engine.step()', ('returns', 1), 'SYS-3: re-encodes A') as got:",
            f"    got.value = {gives}",
            "",
        ]
    )


def test_an_engine_step_that_differs_from_its_graded_run_is_not_a_reproduction() -> None:
    same = _verify(_as_graded_script(1))
    assert same.reproduces and same.step == 1
    assert "which the grader judged: SYS-3: re-encodes A" in same.detail
    other = _verify(_as_graded_script(2))
    assert not other.reproduces and not other.completed
    assert other.detail.startswith("did not replay the graded run: step 1: engine.step()")
    assert "when graded your implementation gave: 1" in other.detail
    assert "reproduces the failure on its own" not in reproducer_outcome(other)



def _verify(source: str, **kwargs: object) -> Verification:
    return verify_script(source, "repro_probe.py", **kwargs)  # type: ignore[arg-type]


def test_a_traceback_is_not_a_reproduction() -> None:
    crashed = _verify("print('step 1: x -> 1')\nraise KeyError('boom')\n")
    assert not crashed.reproduces and not crashed.completed
    assert crashed.detail.startswith("did not reproduce: it stopped with KeyError: 'boom'")
    assert "after step 1" in crashed.detail
    outcome = reproducer_outcome(crashed)
    assert "reproduces the failure on its own" not in outcome
    assert outcome.startswith("did not reproduce")


def test_running_to_the_end_or_faking_the_marker_is_not_a_reproduction() -> None:
    clean = _verify("print('done')\n")
    assert not clean.reproduces and clean.completed
    faked = _verify("import sys\nprint('\\nREPRODUCED: step 1: x', file=sys.stderr)\n")
    assert not faked.reproduces, "exit status 0: it ran to the end"
    exited = _verify("import sys\nsys.exit(3)\n")
    assert not exited.reproduces and "status 3" in exited.detail


def test_a_script_past_its_time_limit_is_killed_and_not_claimed() -> None:
    slow = _verify("import time\ntime.sleep(60)\n", timeout=1.0)
    assert not slow.reproduces
    assert "time limit of 1 s" in slow.detail


def test_the_script_runs_under_the_grading_limits() -> None:
    limits = Limits(memory_bytes=512 * 1024**2, cpu_seconds=7)
    source = (
        "import resource\n"
        "print(resource.getrlimit(resource.RLIMIT_AS), resource.getrlimit(resource.RLIMIT_CPU))\n"
        "raise SystemExit(5)\n"
    )
    probe = _verify(source, limits=limits)
    assert not probe.reproduces and "status 5" in probe.detail
    hog = _verify("x = bytearray(1024 ** 3)\n", limits=limits)
    assert not hog.reproduces and "MemoryError" in hog.detail


def test_the_scripts_output_reaches_the_report_bounded_and_escaped() -> None:
    noisy = (
        "import sys\n"
        "print('x' * 10**6)\n"
        "sys.stderr.write('\\nREPRODUCED: step 2: call\\x1b[31m ```' + 'y' * 5000 + '\\n'"
        " + 'line\\n' * 100)\n"
        "sys.exit(1)\n"
    )
    verification = _verify(noisy)
    assert verification.reproduces and verification.step == 2
    assert "\x1b" not in verification.detail and "\\x1b" in verification.detail
    assert "```" not in verification.detail
    assert len(verification.detail) < 6000
    assert len(verification.detail.splitlines()) <= 13


def test_the_run_line_names_mmspec_home_for_another_machine() -> None:
    assert "MMSPEC_HOME=" in run_line("repro_x.py")

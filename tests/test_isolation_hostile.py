"""The hostile battery: adapters that attack the grader instead of implementing the spec
(tests/fixtures/hostile/), graded through the isolated path. Each must gain no point it
did not earn, with the reason named, and leave the grader running: the item its hasher
is graded on scores 0, the item it leaves alone (the reference's processor) keeps its
real verdict, from a fresh child.

Small limits and a two-item rubric keep the battery to a few seconds per adapter.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import hypothesis
import numpy as np
import pytest
from hypothesis import given

import harness.runner
import properties.framework
import properties.hashing
from harness.grading.formats import FORMATS, render
from harness.grading.grade import GradeReport, ItemStatus, grade
from harness.grading.rubric import load_rubric
from harness.isolation import IsolatedSession, Limits
from tests.conftest import FIXTURES, ROOT, run_cli

HOSTILE = FIXTURES / "hostile"
RUBRIC = load_rubric(str(HOSTILE / "rubric.toml"))
LIMITS = Limits(call_seconds=2, property_seconds=20, memory_bytes=768 * 1024**2, cpu_seconds=60)

#: adapter -> what the "hashing" item's reason must say.
BATTERY = {
    "infinite_loop": r"ImplementationDied: timeout: no answer within 2 s",
    "memory_hog": r"ImplementationDied: out of memory \(limit 768 MiB\)",
    "segfault": r"ImplementationDied: crashed with signal 11 \(SIGSEGV\)",
    "os_exit": r"ImplementationDied: exited with code 0",
    "sys_exit": r"raised SystemExit: 0 \(at tests/fixtures/hostile/sys_exit\.py",
    "keyboard_interrupt": r"raised KeyboardInterrupt: ",
    "base_exception": r"raised Escape: not an Exception",
    "monkeypatch_grader": r"^HASH-2 — .*hashed equal: same-hash-for-everything",
    "fake_report": r"^HASH-2 — .*hashed equal: same-hash-for-everything",
    "lying_eq": r"BadReturnValue: a \S+\.Anything cannot cross the isolation boundary",
    "lying_str": r"^HASH-2 — .*hashed equal: constant",
    "first_call_only": r"^HASH-1 — .*gave [0-9a-f]{64} then constant",
    "sleep_once": r"ImplementationDied: timeout: no answer within 2 s",
    "forge_reply": r"ImplementationDied: broke the protocol: a frame may not name a class",
    # issue 15, defect 7: shared references (x = [x, x], 60 deep) are refused, not followed
    "memo_bomb": r"ImplementationDied: broke the protocol: a frame may not share a container",
    # issue 32, item 5: refused before anything is built or hashed (pickle hashes a set's
    # items and a dict's keys as it builds them): x = (x, x) sixty deep as a frozenset's
    # item, a set's, a dict's key (136 bytes, for ever), alone; 200,000 ints with one
    # hash (minutes), and the same in the tagged form that sets of non-strings cross in
    "frozenset_bomb": r"ImplementationDied: broke the protocol: a frame may not share a container",
    "set_bomb": r"ImplementationDied: broke the protocol: a frame may not share a container",
    "dict_key_bomb": r"ImplementationDied: broke the protocol: a frame may not share a container",
    "tuple_bomb": r"ImplementationDied: broke the protocol: a frame may not share a container",
    "hash_flood": r"ImplementationDied: broke the protocol: a frame may hash only strings",
    "hash_flood_tagged": r"BadReturnValue: the result could not be decoded: more than 8 keys",
    # issue 15, defect 5: a 200 MB reply is refused from its header, not read
    "huge_reply": r"ImplementationDied: reply too large: \d+ bytes, over the limit of 32 MiB",
    # issue 15, defects 2, 4, 6: text from the child, made safe and cut in the report
    "lone_surrogate": r"^HASH-2 — .*hashed equal: constant \\ud800$",
    "terminal_escapes": r"^HASH-2 — .*hashed equal: constant\\x1b\[2J\\x1b\[H",
    "huge_value": r"^HASH-2 — .*: (0123456789abcdef){12}\S{8}\.\.\.\[4194304 characters in all",
}


def _graded(name: str) -> GradeReport:
    return grade(
        str(HOSTILE / f"{name}.py"), RUBRIC, "ci", isolation=LIMITS, reproducers=False
    )


@pytest.mark.parametrize("name", sorted(BATTERY))
def test_a_hostile_adapter_gains_nothing_and_the_grader_carries_on(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MMSPEC_HOSTILE_MARKER", str(tmp_path))
    report = _graded(name)
    assert report.load_error is None
    hashing, expansion = (r for r in report.items)
    assert (hashing.item.name, expansion.item.name) == ("hashing", "expansion")
    assert hashing.status is ItemStatus.FAILED and hashing.score == 0, hashing.summary
    assert hashing.failures, "a failed item shows its failure"
    assert re.search(BATTERY[name], hashing.summary), hashing.summary
    # What it does not attack keeps its real verdict, from a live (or fresh) child.
    assert expansion.status is ItemStatus.PASSED and expansion.score == 5, expansion.summary
    assert report.score == 5
    assert "isolation: child process (per call 2 s" in render(report, "text")
    for format_name in FORMATS:  # a report in every format, whatever the child did
        assert render(report, format_name).strip(), format_name
    assert not (tmp_path / "pwned").exists()  # forge_reply's pickle never ran


def test_numpy_string_scalars_score_as_in_process() -> None:
    # issue 15, defect 3: a correct hash returned as numpy.str_ is plain data; isolated
    # and in-process grading agree on it, report for report
    isolated = _graded("numpy_scalars")
    in_process = grade(str(HOSTILE / "numpy_scalars.py"), RUBRIC, "ci", reproducers=False)
    assert isolated.score == in_process.score == 10
    for name in ("text", "json", "markdown", "junit", "gradescope"):
        a, b = (_timeless(render(r, name), r) for r in (in_process, isolated))
        assert a == b, name


#: What differs between two runs of one report: timings (as tests/test_isolation.py).
_VARYING = re.compile(
    r'( in \d+\.\d s| \d+\.\d s\)|"(execution_time|seconds)": [\d.]+|time="[\d.]+"'
    r'|timestamp="[^"]+"|_Graded in [\d.]+ s\._)'
)


def _timeless(text: str, report: GradeReport) -> str:
    return _VARYING.sub("<t>", text.replace(report.isolation, "<isolation>"))


#: C0/C1 controls but newline and tab, DEL, and lone surrogates: never in a report.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


@pytest.mark.parametrize("name", ["lone_surrogate", "terminal_escapes", "huge_value"])
def test_text_from_the_child_is_safe_and_short_in_every_format(name: str) -> None:
    # issue 15, defects 2, 4, 6: a lone surrogate crashed every writer but JUnit's, ESC
    # sequences repainted the terminal, a 4 MB hash was copied into each quote of it;
    # with reproducers built and verified (they quote the value too)
    report = grade(str(HOSTILE / f"{name}.py"), RUBRIC, "ci", isolation=LIMITS)
    hashing, expansion = report.items
    assert (hashing.score, expansion.score) == (0, 5)
    assert any(f.reproducer and f.reproducer.verification for f in hashing.failures)
    for format_name in FORMATS:
        text = render(report, format_name)
        assert text.strip() and text.encode("utf-8"), format_name
        assert not _UNSAFE.search(text), (format_name, _UNSAFE.search(text))
        assert len(text) < 64 * 1024, (format_name, len(text))
    assert not _UNSAFE.search(report.submission_output)


@pytest.mark.parametrize("name", ["lone_surrogate", "terminal_escapes"])
def test_the_command_line_writes_the_report_and_escapes_the_output(
    name: str, tmp_path: Path
) -> None:
    # issue 15, defects 2 and 4: the grader exited 2 with an empty --out in four formats;
    # the submission output on stderr repainted the terminal
    out = tmp_path / "results.json"
    done = run_cli(
        "grade", str(HOSTILE / f"{name}.py"), "--rubric", str(HOSTILE / "rubric.toml"),
        "--profile", "ci", "--format", "gradescope", "--out", str(out), "--quiet",
        "--call-timeout", "2",
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["score"] == 5
    assert not _UNSAFE.search(done.stderr)  # the submission output, escaped
    if name == "terminal_escapes":
        assert "\\x1b[2J\\x1b[H\\x1b[32mscore: 10/10" in done.stderr


def test_nothing_the_submission_starts_outlives_grading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 15, defect 1: the reproducer's run, like the child, is contained: a grandchild
    # in a session of its own (out of reach of the process-group kill) is killed with it
    monkeypatch.setenv("MMSPEC_HOSTILE_MARKER", str(tmp_path))
    report = grade(str(HOSTILE / "reproducer_escape.py"), RUBRIC, "ci", isolation=LIMITS)
    hashing, expansion = report.items
    assert (hashing.score, expansion.score) == (0, 5)
    verified = [f.reproducer.verification for f in hashing.failures if f.reproducer]
    assert verified and all(v is not None and v.reproduces for v in verified)
    # the grandchildren would have written by now (ESCAPE_DELAY after their fork, which
    # came before the grade's end)
    time.sleep(13)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("name", "raised", "where", "printed"),
    [
        (
            "factory_generator_exit",
            "GeneratorExit: the factory gave up",
            r"factory_generator_exit\.py\", line \d+, in hasher",
            "factory-output: about to raise GeneratorExit",
        ),
        (
            "import_interrupt",
            "KeyboardInterrupt: interrupted at import",
            r"import_interrupt\.py\", line \d+, in <module>",
            "import-output: about to raise KeyboardInterrupt",
        ),
    ],
)
def test_a_load_time_crash_is_explained(name: str, raised: str, where: str, printed: str) -> None:
    # issue 15, defect 8: a BaseException while loading reads as what it is, where it
    # was raised and what the child printed, not "exited with code 1" / "signal 2"
    report = _graded(name)
    assert report.load_error is not None and report.score == 0
    assert f"loading raised {raised}" in report.load_error, report.load_error
    assert re.search(where, report.load_error), report.load_error
    assert printed in report.load_error, report.load_error
    for format_name in FORMATS:
        assert render(report, format_name).strip(), format_name


def test_monkeypatching_in_the_child_leaves_the_graders_modules_alone() -> None:
    originals = (
        properties.framework.check,
        properties.hashing.check,
        properties.framework.ClauseViolation,
        harness.runner.run_property,
        given,
    )
    _graded("monkeypatch_grader")
    now = (
        properties.framework.check,
        properties.hashing.check,
        properties.framework.ClauseViolation,
        harness.runner.run_property,
        hypothesis.given,
    )
    assert now == originals


def test_a_fake_report_stays_in_the_submission_output(tmp_path: Path) -> None:
    done = run_cli(
        "grade", str(HOSTILE / "fake_report.py"), "--rubric", str(HOSTILE / "rubric.toml"),
        "--profile", "ci", "--format", "json", "--no-reproducers", "--quiet",
        "--call-timeout", "2",
        # a command prefix (here a harmless one) runs the child behind it
        "--child-prefix", "env MMSPEC_PREFIXED=1",
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)  # stdout is the report alone: it parses
    assert (report["score"], report["max_score"]) == (5, 10)
    assert "env MMSPEC_PREFIXED=1" in report["isolation"]
    assert "mmspec grade: 100/100" not in done.stdout
    assert "submission output" in done.stderr and "mmspec grade: 100/100" in done.stderr


def test_inputs_mutated_after_returning_do_not_reach_the_grader(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # mutate_inputs hashes correctly but scribbles over what it was given, later: the
    # grader's values are copies decoded from bytes, so nothing of ours changes.
    with IsolatedSession(str(HOSTILE / "mutate_inputs.py"), LIMITS) as session:
        session.begin_property("probe")
        hasher = session.loaded.adapter.hasher
        assert hasher is not None
        product = hasher()
        array = np.arange(6, dtype=np.int32).reshape(2, 3)
        value = [b"abc", array, {"k": [1, 2]}]
        options = {"size": [4, 5]}
        first = product.hash_item(value, options)
        second = product.hash_item(value, options)  # the child now scribbles on call 1's
        third = product.hash_item(value, options)
        assert first == second == third
        assert value[0] == b"abc" and value[2] == {"k": [1, 2]} and options == {"size": [4, 5]}
        assert np.array_equal(array, np.arange(6, dtype=np.int32).reshape(2, 3))
    # and graded, it earns exactly what it earns: both items, as it hashes correctly
    report = _graded("mutate_inputs")
    assert report.score == report.max_score == 10


@pytest.mark.parametrize(
    ("name", "limits", "reason"),
    [
        # the CPU-time limit (RLIMIT_CPU) stops a loop the wall clock would allow
        (
            "infinite_loop",
            Limits(call_seconds=60, property_seconds=60, cpu_seconds=2),
            r"CPU time limit of 2 s exceeded \(SIGXCPU\)",
        ),
        # the per-property limit stops calls that are each fast enough
        (
            "slow_calls",
            Limits(call_seconds=2, property_seconds=1.5),
            r"timeout: the property's time limit of 1.5 s ran out",
        ),
    ],
)
def test_the_cpu_and_per_property_limits(name: str, limits: Limits, reason: str) -> None:
    report = grade(
        str(HOSTILE / f"{name}.py"), RUBRIC, "ci", isolation=limits, reproducers=False
    )
    hashing, expansion = report.items
    assert hashing.score == 0 and re.search(reason, hashing.summary), hashing.summary
    assert expansion.score == 5, expansion.summary


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make: install GNU make")
@pytest.mark.parametrize(
    ("name", "status"), [("lying_str", 0), ("mutate_inputs", 0), ("import_interrupt", 2)]
)
def test_make_grade_exits_2_only_when_the_adapter_cannot_be_used(
    name: str, status: int, tmp_path: Path
) -> None:
    # issue 15, defect 9: make turned the grader's 1 (points lost) into its own 2, which
    # the docs reserve for "the adapter cannot be used"; make cannot exit 1, so a graded
    # adapter is 0 whatever its score (the score is in the report) and 2 stays 2
    venv = Path(sys.prefix)
    done = subprocess.run(
        [
            "make", "-s", "-o", f"{venv}/.installed", "grade", f"VENV={venv}",
            f"ADAPTER={HOSTILE / f'{name}.py'}", f"RUBRIC={HOSTILE / 'rubric.toml'}",
            "GRADE_PROFILE=ci", f"REPRODUCERS={tmp_path}", "GRADE_FLAGS=--no-reproducers --quiet",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == status, done.stderr
    assert "mmspec grade:" in done.stdout
    lost = "graded, points lost (the grader exited 1; make exits 0)" in done.stderr
    assert lost == (name == "lying_str"), done.stderr

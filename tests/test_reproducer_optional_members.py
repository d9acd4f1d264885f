"""A reproducer uses only what the implementation provides (issue 32, item 3).

Builds without an optional capability (spec/components.py's extension Protocols: the
cache manager's ``reset()`` and bookkeeping, the engine loop's resets, the encoder's
precisions, the splice's bfloat16), each with a real bug, are graded isolated; every
script they get is run from a folder outside the checkout and must end in REPRODUCED.
Before, the grader's probes of the members a build lacks (``getattr(cache, "reset",
None)``, ``isinstance(encoder, MultiPrecisionEncoder)``) were recorded as the script's
first steps, and the cache manager's, the engine's and the encoder's scripts ended in
``AttributeError: ... has no attribute 'reset'`` (the splice's probe was never recorded:
it is here so that every optional capability of a component some zoo bug reaches is).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.grading.grade import GradeReport, grade
from harness.grading.rubric import load_rubric
from harness.isolation import Limits
from harness.loader import load_adapter
from spec.types import EngineConfig
from tests.conftest import FIXTURES, ROOT

RUBRIC = load_rubric(None)

#: (adapter, what to grade it on, the component, the optional members it lacks): the
#: cache manager and the engine loop lose points through a state machine that probes
#: their optional capabilities while it runs (or is built); the encoder and the splice
#: through differential properties that ask for their extra precisions.
BUILDS: tuple[tuple[str, tuple[str, ...], str, tuple[str, ...]], ...] = (
    (str(FIXTURES / "ecm_without_optional_members.py"), ("ECM-5",), "encoder_cache_manager",
     ("reset", "tracked_request_ids", "tracked_mm_hashes")),
    (str(FIXTURES / "engine_without_resets.py"), ("SYS-12",), "engine_loop",
     ("reset_encoder_cache", "reset_prefix_cache", "num_speculative_tokens",
      "async_scheduling")),
    ("adapters.zoo.enc_batch_shares_rng", ("DIFF-4",), "encoder",
     ("precisions", "device_type", "encode_batch_as")),
    ("adapters.zoo.spl_reversed_items", ("DIFF-1",), "splice",
     ("merge_bfloat16", "inject_bfloat16")),
)  # fmt: skip


@functools.cache
def _graded(adapter: str, only: tuple[str, ...]) -> GradeReport:
    return grade(adapter, RUBRIC, "ci", only=only, isolation=Limits())


def _built(adapter: str, component: str) -> object:
    factory = getattr(load_adapter(adapter).adapter, component)
    if component == "engine_loop":
        from harness.loader import build_parts

        parts = build_parts(load_adapter(adapter).adapter, load_adapter("reference").adapter)
        return factory(EngineConfig(), parts.engine_parts())
    args = {"encoder_cache_manager": (8,), "encoder": (4,), "splice": ()}[component]
    return factory(*args)


def _run_outside(script: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """As a student runs it: from ``folder``, with neither MMSPEC_HOME nor PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("MMSPEC_HOME", "PYTHONPATH")}
    return subprocess.run([sys.executable, str(script)], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


@pytest.mark.parametrize(
    "adapter, only, component, absent", BUILDS, ids=[f"{b[2]} without {b[3][0]}" for b in BUILDS]
)
def test_every_script_of_a_build_without_optional_members_ends_in_reproduced(
    adapter: str, only: tuple[str, ...], component: str, absent: tuple[str, ...],
    tmp_path: Path,
) -> None:
    built = _built(adapter, component)
    assert not [m for m in absent if hasattr(built, m)], "the build lacks them: the premise"
    assert not tmp_path.resolve().is_relative_to(ROOT)
    report = _graded(adapter, only)
    failures = [f for item in report.items for f in item.failures]
    assert failures, f"{adapter} lost no points on {only}"
    for failure in failures:
        reproducer = failure.reproducer
        assert reproducer is not None, failure.reproducer_note
        code = [line for line in reproducer.script.splitlines()
                if not line.lstrip().startswith("#")]  # fmt: skip
        asked = [line for line in code for m in absent if re.search(rf"\.{m}\b", line)]
        assert not asked, asked[:3]
        verification = reproducer.verification
        assert verification is not None and verification.reproduces, verification
        script = tmp_path / reproducer.filename
        script.write_text(reproducer.script, encoding="utf-8")
        done = _run_outside(script, tmp_path)
        assert done.returncode == 1, (done.stdout[-2000:], done.stderr[-2000:])
        assert "\nREPRODUCED: step " in done.stderr, done.stderr[-2000:]

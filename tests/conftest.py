"""Shared test setup: the project's own Hypothesis tests run under the ``ci`` profile
(derandomized, no database), so ``make test`` gives the same result on every run.
Set HYPOTHESIS_PROFILE=dev to explore instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from harness.profiles import DEFAULT_PROFILE  # importing it registers the profiles

settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", DEFAULT_PROFILE))

#: The checkout root (the working directory ``make`` runs in).
ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def fixtures_dir() -> Path:
    """The malformed (and two well-formed) adapters of the loader's and runner's tests."""
    return FIXTURES


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m properties ARGS`` in a child that inherits nothing of this process's
    environment but the checkout on its path (as a fresh shell runs it); never raises
    on the exit status."""
    return subprocess.run(
        [sys.executable, "-m", "properties", *args],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )

"""Shared test setup: the project's own Hypothesis tests run under mmspec's ``ci`` settings
(derandomized, no database), so ``make test`` gives the same result on every run.
Set HYPOTHESIS_PROFILE=dev (another of harness/profiles.py's) to explore instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from harness.profiles import DEFAULT_PROFILE, profile_settings

# harness.profiles registers no global profile (the plugin must not touch a team's): this
# suite registers mmspec's settings under a name of its own, for its own tests only.
settings.register_profile(
    "mmspec-tests", profile_settings(os.environ.get("HYPOTHESIS_PROFILE", DEFAULT_PROFILE))
)
settings.load_profile("mmspec-tests")

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

"""Shared test setup: the project's own Hypothesis tests run under mmspec's ``ci`` settings
(derandomized, no database), so ``make test`` gives the same result on every run.
Set HYPOTHESIS_PROFILE=dev (another of harness/profiles.py's) to explore instead."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import settings

from harness import pytest_plugin as mmspec_plugin
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


_T = TypeVar("_T")
#: Under pytest-xdist, names this pytest run's folder through which the workers share the
#: slow results several tests read (:func:`_share_runs_across_workers` sets it). An
#: environment variable, not a global: pytest imports this file as ``conftest`` and the
#: tests import it as ``tests.conftest``, two modules with globals of their own.
SHARED_RUNS_ENV = "MMSPEC_TESTS_SHARED_RUNS"


@pytest.fixture(autouse=True, scope="session")
def _share_runs_across_workers(tmp_path_factory: pytest.TempPathFactory) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") and mmspec_plugin.fcntl is not None:
        folder = tmp_path_factory.getbasetemp().parent / "mmspec-shared-runs"
        os.environ[SHARED_RUNS_ENV] = str(folder)


def once_across_workers(key: str, run: Callable[[], _T]) -> _T:
    """``run()``, made once for every test of this pytest run that asks for ``key``: in
    one process the caller's cache does that; under pytest-xdist, two tests reading one
    grade may run on two workers, and the first to ask runs it while the other waits,
    then reads it (pickled; the plugin's way, :func:`harness.pytest_plugin._shared`)."""
    folder = os.environ.get(SHARED_RUNS_ENV)
    return mmspec_plugin._shared(Path(folder), key, run) if folder else run()

"""Shared test setup: the project's own Hypothesis tests run under the ``ci`` profile
(derandomized, no database), so ``make test`` gives the same result on every run.
Set HYPOTHESIS_PROFILE=dev to explore instead."""

from __future__ import annotations

import os
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

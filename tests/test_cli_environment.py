"""The command line honours Hypothesis' own way of choosing a profile (issue 21)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _verify(profile: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"}
    env["PYTHONPATH"] = str(ROOT)
    if profile is not None:
        env["HYPOTHESIS_PROFILE"] = profile
    return subprocess.run(
        [sys.executable, "-m", "properties", "verify", "--only", "SPL-4"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )


def test_hypothesis_profile_chooses_the_profile_when_no_flag_is_given() -> None:
    assert "\nprofile: dev\n" in _verify("dev").stdout
    assert "\nprofile: ci\n" in _verify(None).stdout


def test_a_foreign_profile_name_is_said_and_ignored() -> None:
    done = _verify("my-engines-own")
    assert "\nprofile: ci\n" in done.stdout
    assert "HYPOTHESIS_PROFILE='my-engines-own' is not one of" in done.stderr


def test_the_version_names_the_spec_digest() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "properties", "--version"],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
        text=True, check=True,
    ).stdout
    assert out.startswith("mmspec ") and "SPEC.md digest " in out

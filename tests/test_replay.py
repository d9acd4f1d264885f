"""A failure's replay lines, pasted into a shell in another folder (issue 33, item 3).

The first line re-runs the property's whole search; the second (``--replay VERSION:BLOB``)
runs the one shrunk test case again. Both name the interpreter that ran, give the adapter
as an absolute path and put the adapter's own project on ``PYTHONPATH`` — the engine team's
``No module named 'myengine'`` was a replay line that left it off.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.replay import (
    ReplayBlobError,
    adapter_argument,
    blob_argument,
    invocation,
    parse_replay,
)
from harness.report import EXAMPLE_REPLAY_HEADING
from tests.conftest import ROOT

#: A project of an engine team's own: its adapter imports its package, which is
#: importable from the project's folder only (as pytest makes it, from its rootdir).
_PACKAGE = """
from adapters.zoo.hash_by_length import LengthHasher as EngineHasher
"""
_ADAPTER = """
from myengine import EngineHasher
from spec.adapter import Adapter

ADAPTER = Adapter(name="myengine", hasher=EngineHasher)
"""


def _project(root: Path) -> Path:
    (root / "myengine").mkdir(parents=True)
    (root / "myengine" / "__init__.py").write_text(_PACKAGE, encoding="utf-8")
    (root / "adapter.py").write_text(_ADAPTER, encoding="utf-8")
    return root


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # only what the replay line itself says
    return env


def _verify(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "properties", "verify", *args]
    env = dict(_env(), PYTHONPATH=str(ROOT))
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)


def _shell(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=_env(), capture_output=True,
                          text=True)


def _section(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def test_both_replay_lines_reproduce_the_failure_pasted_into_another_folder(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path / "engine")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    found = _verify(project, "--adapter", "adapter.py", "--profile", "ci", "--only", "HASH-2")
    assert found.returncode == 1, found.stdout + found.stderr
    lines = found.stdout.splitlines()
    whole = lines[lines.index("replay:") + 1].strip()
    one = lines[lines.index(EXAMPLE_REPLAY_HEADING) + 1].strip()
    assert f"{sys.executable} -m properties verify --adapter {project / 'adapter.py'} " in whole
    assert str(project) in whole.split()[0]  # PYTHONPATH=...: the project's folder
    assert one.startswith(whole) and " --replay 6." in one

    again = _shell(whole, elsewhere)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "HASH-2  hash_same_length_different_bytes" in again.stdout and "FAIL" in again.stdout

    example = _shell(one, elsewhere)
    assert example.returncode == 1, example.stdout + example.stderr
    row = next(line for line in example.stdout.splitlines() if line.startswith("HASH-2"))
    assert row.split()[2:4] == ["1", "FAIL"]  # the one test case, failing as it did
    counterexample = _section(found.stdout, "counterexample:", "reproduce blob:")
    assert _section(example.stdout, "counterexample:", "reproduce blob:") == counterexample
    assert "Failing test case" not in example.stdout.split("clause  property")[0]


def test_a_replay_blob_needs_one_property_and_a_blob() -> None:
    blob = "6.170.15:AXicY2BgYAQAAAgAAg=="
    several = _verify(
        ROOT, "--adapter", "reference", "--replay", blob, "--only", "HASH-1", "HASH-2"
    )
    assert several.returncode == 2
    assert "a replay blob replays one example of one property: --only selects 2" in several.stderr
    garbled = _verify(ROOT, "--adapter", "reference", "--replay", "not a blob", "--only", "HASH-1")
    assert garbled.returncode == 2
    assert "--replay 'not a blob': not a reproduce blob" in garbled.stderr


def test_blobs_read_in_both_forms() -> None:
    printed = "@reproduce_failure('6.170.15', b'AXicY2BgYAQAAAgAAg==')"
    assert blob_argument(printed) == "6.170.15:AXicY2BgYAQAAAgAAg=="
    assert parse_replay(printed) == parse_replay("6.170.15:AXicY2BgYAQAAAgAAg==")
    assert parse_replay(printed) == ("6.170.15", b"AXicY2BgYAQAAAgAAg==")
    with pytest.raises(ReplayBlobError):
        parse_replay("6.170.15:not base64!")
    assert blob_argument(None) is None


def test_an_adapter_path_becomes_absolute_and_a_module_name_stays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT / "adapters")
    assert adapter_argument("zoo/hash_by_length.py") == str(ROOT / "adapters/zoo/hash_by_length.py")
    assert adapter_argument("zoo") == "zoo"  # a module name: the loader imports it
    assert adapter_argument("reference") == "reference"


def test_a_replay_line_sets_the_variables_that_chose_the_code_it_ran(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run of the vLLM adapter's model runner V2 (or shared-memory pair) replays V2's
    code: the line sets each code-selecting variable this process has set, and no
    other."""
    monkeypatch.delenv("MMSPEC_VLLM_PROCESSOR_CACHE", raising=False)
    monkeypatch.delenv("MMSPEC_VLLM_MODEL_RUNNER", raising=False)
    assert "MMSPEC_VLLM" not in invocation()
    monkeypatch.setenv("MMSPEC_VLLM_MODEL_RUNNER", "v2")
    line = invocation()
    assert line.startswith("MMSPEC_VLLM_MODEL_RUNNER=v2 ")
    assert "MMSPEC_VLLM_PROCESSOR_CACHE" not in line

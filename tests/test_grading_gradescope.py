"""The Gradescope autograder, end to end in a simulated ``/autograder`` tree.

The bundle is built from this checkout, unpacked into ``<tmp>/autograder/source``,
``setup.sh`` runs (with ``MMSPEC_PYTHON``: it reuses the interpreter running these tests,
which has the pins, instead of creating a virtualenv and installing them — it still
checks the versions), then ``run_autograder`` grades a submission in
``<tmp>/autograder/submission`` and writes ``<tmp>/autograder/results/results.json``,
which must be valid against the JSON Schema of Gradescope's format.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import FIXTURES, ROOT

sys.path.insert(0, str(ROOT / "gradescope"))
import make_bundle  # noqa: E402 - gradescope/ is a folder of scripts, not a package

SCHEMA = json.loads((FIXTURES / "gradescope.schema.json").read_text())
SECRET = 8675309


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    return make_bundle.build(out, profile="ci", seed=SECRET)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A folder every user may traverse (pytest's own are root's alone): as root,
    setup.sh sets up the sandbox user, who must read the grader and the submission."""
    folder = Path(tempfile.mkdtemp(prefix="mmspec-autograder-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _autograder(tmp_path: Path, bundle: Path, submission: dict[str, str]) -> Path:
    """Unpack the bundle and a submission into ``tmp_path/autograder``; run setup.sh."""
    root = tmp_path / "autograder"
    source = root / "source"
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(source)
        for info in archive.infolist():  # zipfile drops the permission bits
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                (source / info.filename).chmod(mode)
    (root / "submission").mkdir()
    for name, text in submission.items():
        path = root / "submission" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    setup = subprocess.run(
        ["bash", str(source / "setup.sh")],
        env={**os.environ, "MMSPEC_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert setup.returncode == 0, setup.stdout + setup.stderr
    return root


#: Held while an autograder runs: the runs share one sandbox user, and each, when it
#: ends, kills every process of that user (docs/grading.md, "Isolation") — a run on the
#: other pytest-xdist worker would lose its child ("killed by signal 9"). On Gradescope
#: one grading has the machine to itself. One lock per user that runs the tests (only
#: root's runs have a sandbox user; another user's lock file would refuse to open).
_ONE_SANDBOXED_RUN = Path(tempfile.gettempdir()) / f"mmspec-sandbox-user-{os.getuid()}.lock"


def _run(root: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with _ONE_SANDBOXED_RUN.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            [str(root / "source" / "run_autograder")],
            cwd=root,
            env={**env, "AUTOGRADER_ROOT": str(root)},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(results)
    return results


def _zoo(name: str) -> str:
    return (ROOT / "adapters" / "zoo" / f"{name}.py").read_text()


def test_the_bundle_has_gradescopes_layout(bundle: Path) -> None:
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in archive.infolist()}
        env = archive.read("grading.env").decode()
        pins = archive.read("requirements-autograder.txt").decode()
    assert {"setup.sh", "run_autograder", "grading.env", "requirements-autograder.txt"} <= names
    assert modes["setup.sh"] == modes["run_autograder"] == 0o755
    assert {"spec/SPEC.md", "harness/grading/grade.py", "rubrics/default.toml",
            "adapters/template/adapter.py"} <= names
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", ".venv"))]
    assert f"SEED={SECRET}" in env and "PROFILE=ci" in env
    assert re.fullmatch(r"hypothesis==\S+\nnumpy==\S+\n", pins)


def test_the_bundle_is_reproducible(bundle: Path, tmp_path: Path) -> None:
    again = make_bundle.build(tmp_path / "again.zip", profile="ci", seed=SECRET)
    assert again.read_bytes() == bundle.read_bytes()


#: A student's own hasher (the reference is the grader's alone: a submission cannot
#: import it), which the zoo's size-only bug is laid over.
OWN_HASHER = """\
import hashlib


class Hasher:
    def hash_item(self, data, options=None):
        shown = repr((type(data).__name__, data, sorted((options or {}).items())))
        return hashlib.sha256(shown.encode()).hexdigest()
"""


def test_a_buggy_submission_is_graded_with_its_counterexample(
    bundle: Path, scratch: Path
) -> None:
    # A submission: the adapter (the template's role) and a module of the student's own;
    # it imports the spec as an installed adapter does (one adapter for every copy:
    # issue 33, item 5)
    adapter = _zoo("hash_by_length").replace(
        "from reference.hasher import Hasher", "from my_build.hashing import Hasher"
    ).replace("from spec.", "from mmspec.spec.")
    assert "my_build" in adapter and "from spec." not in adapter
    root = _autograder(
        scratch,
        bundle,
        {
            "adapter.py": adapter,
            "my_build/__init__.py": "",
            "my_build/hashing.py": OWN_HASHER,
        },
    )
    first = _run(root)
    tests = {t["name"]: t for t in first["tests"]}
    assert first["score"] == sum(t["score"] for t in first["tests"])
    done_2 = tests["Done 2: cache sharing by content"]
    assert done_2["status"] == "failed" and done_2["score"] == 0
    assert "HASH-2 — different bytes, different hash" in done_2["output"]
    assert "--seed SECRET" in done_2["output"] and str(SECRET) not in json.dumps(first)
    assert "repro_hash_same_length_different_bytes_hash_2.py" in done_2["output"]
    assert tests["Done 4: eviction"]["status"] == "failed"  # not provided: 0 points
    assert "not provided" in tests["Done 4: eviction"]["output"]

    second = _run(root)  # the same seed: the same results, timings apart
    first.pop("execution_time")
    second.pop("execution_time")
    assert first == second


def test_a_submission_without_an_adapter_gets_a_result_that_says_so(
    bundle: Path, scratch: Path
) -> None:
    root = _autograder(scratch, bundle, {"README.txt": "forgot it"})
    results = _run(root)
    assert results["score"] == 0 and "No adapter.py in your submission" in results["output"]


def test_the_unfilled_template_scores_zero(bundle: Path, scratch: Path) -> None:
    template = (ROOT / "adapters" / "template" / "adapter.py").read_text()
    root = _autograder(scratch, bundle, {"adapter.py": template})
    results = _run(root)
    assert results["score"] == 0
    assert all("not provided" in t["output"] for t in results["tests"])
    # points lost: failed; an optional item worth none: no status (not a red failure)
    assert all(t.get("status") == ("failed" if t["max_score"] else None)
               for t in results["tests"])


def test_setup_refuses_an_unsupported_or_unpinned_python(bundle: Path, tmp_path: Path) -> None:
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(root / "source")
    pins = root / "source" / "requirements-autograder.txt"
    pins.write_text(pins.read_text().replace("numpy==", "numpy==0.0."))
    done = subprocess.run(
        ["bash", str(root / "source" / "setup.sh")],
        env={**os.environ, "MMSPEC_PYTHON": sys.executable},
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode != 0 and "numpy: need 0.0." in done.stderr


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="the bundle's sandbox is set up by root (as on Gradescope), with setpriv:"
    " run this test as root on a machine with util-linux's setpriv (CI does)",
)
def test_with_the_default_setup_a_submission_cannot_reach_the_grader(
    bundle: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 15: built and set up as Gradescope does, as root, the bundle runs the
    # submission as its own user: it cannot read grading.env (the secret seed) or the
    # rubric, find the seed on a command line, signal or prlimit the grader, or change
    # results.json, during grading or after it; issue 32: nor import or read the answer
    # key (the reference, the models), which stands in for what it lacks from the grader
    marker = scratch / "marker"
    marker.mkdir()
    marker.chmod(0o1777)
    hostile = (FIXTURES / "hostile" / "sandbox_escape.py").read_text()
    root = _autograder(scratch, bundle, {"adapter.py": hostile})
    users = (root / "source" / ".mmspec-sandbox-user").read_text().strip()
    assert users == "mmspec-grader," + ",".join(f"mmspec-grader-{n}" for n in range(1, 5))
    monkeypatch.setenv("MMSPEC_HOSTILE_MARKER", str(marker))
    monkeypatch.setenv("MMSPEC_GRADE_JOBS", "2")  # two workers, whatever this machine has
    results = _run(root)
    written = (root / "results" / "results.json").read_bytes()
    time.sleep(3)  # the late writer, had it survived, would have written by now
    assert (root / "results" / "results.json").read_bytes() == written
    tests = {t["name"]: t for t in results["tests"]}
    assert tests["Done 2: cache sharing by content"]["score"] == 0
    assert 0 < results["score"] < sum(t["max_score"] for t in results["tests"])
    lines = (marker / "attempts.jsonl").read_text().splitlines()
    attempts = [json.loads(line) for line in lines]
    assert attempts, "the submission ran"
    by_what = {a["what"]: a for a in attempts}
    for what in ("read grading.env", "read the rubric", "write results.json",
                 "read the reference", "read the models", "read the oracles"):
        assert not by_what[what]["done"] and "PermissionError" in by_what[what]["got"], what
    # the answer key: never in the submission's process, nor compiled where it can read
    for what in ("import the reference", "read a compiled answer key"):
        assert not by_what[what]["done"], by_what[what]
    assert str(SECRET) not in by_what["seed on a command line"]["got"]
    signals = [a for a in attempts if a["what"].startswith(("SIGSTOP", "prlimit"))]
    assert signals and not [a for a in signals if a["done"]], signals
    # the grade ran in two workers, each child as a user of its own beside the grader's
    # child's, and none of them could stop another's
    assert {a["got"] for a in attempts if a["what"] == "runs as"} == {
        "mmspec-grader", "mmspec-grader-1", "mmspec-grader-2"}
    assert [a for a in attempts if a["what"].startswith("SIGSTOP another sandbox user")]
    late = [a for a in attempts if a["what"] == "late write of results.json"]
    assert not [a for a in late if a["done"]], late


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="the sandbox users are set up by root (as on Gradescope), with setpriv",
)
def test_under_the_sandbox_two_workers_give_the_report_one_process_gives(
    bundle: Path, scratch: Path
) -> None:
    # issue 31: each forked worker's children run as a user of its own (burying one
    # kills every process of its user), so a grade uses the CPUs it is given; the report
    # is the one a single process gives, engine machine included
    files = {f"from_spec/{p.name}": p.read_text() for p in (FIXTURES / "from_spec").glob("*.py")}
    files["adapter.py"] = "from from_spec import ADAPTER  # noqa: F401\n"
    root = _autograder(scratch, bundle, files)
    source = root / "source"
    users = (source / ".mmspec-sandbox-user").read_text().strip()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    reports = {}
    for jobs in ("1", "2"):
        out = root / f"report-{jobs}.json"
        with _ONE_SANDBOXED_RUN.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = subprocess.run(
                [sys.executable, "-m", "properties", "grade",
                 str(root / "submission" / "adapter.py"), "--profile", "ci",
                 "--sandbox-user", users, "--jobs", jobs, "--format", "json",
                 "--out", str(out), "--no-reproducers", "--only", "hash_equal_content_equal_hash",
                 "spl_no_broadcast", "EncoderCacheMachine", "EngineMachine"],
                cwd=source, env={**env, "PYTHONPATH": str(source)},
                capture_output=True, text=True, timeout=600, check=False,
            )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "may read the answer key" not in done.stderr  # setup.sh hid it
        reports[jobs] = re.sub(r'"(seconds|execution_time)": [0-9.]+', "<t>", out.read_text())
    assert reports["1"] == reports["2"]
    assert '"EngineMachine"' in reports["1"]

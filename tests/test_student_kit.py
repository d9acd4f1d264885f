"""The student kit (``make student-kit``, docs/grading.md "The student kit").

The kit is built from this checkout with a course rubric holding one hidden item, then
checked for what it must not hand out (reference/, the zoo, the hidden item, a seed).
It is unpacked into a folder outside the checkout, and two submissions — the reference's
code copied into the submission as the student's own package ``mybuild`` (imports
rewritten), and the same with one zoo bug applied (``worker_keeps_freed``) — are graded
by the kit's runner and by the full grader of the checkout under the same seed, profile
and ``--only``. The verdicts agree on every item the kit judges (the public items); the
hidden items (``autograder_only``: the expansion item's properties compare with oracles
the kit does not hold) read "needs the reference" in the kit, with 0 points, and
are judged by the full grader.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from harness.grading.rubric import load_rubric, parse_rubric
from studentkit import make_kit
from tests.conftest import ROOT

HIDDEN_NAME = "Zq47 secret item: count agreement"
#: Properties graded (``--only``): the items holding them run, each in both graders.
ONLY = ("exp_toy_policy", "hash_count_mismatch_rejected", "wrk_freed_hash_dropped",
        "pfx_every_identity_kind_keys", "enc_output_shape")
SEED = "3"
ADAPTER = """\
from mybuild.encoder import Encoder as ToyEncoder
from mybuild.encoder_cache import EncoderCacheManager
from mybuild.hasher import Hasher
from mybuild.prefix import BlockHasher
from mybuild.processor import Processor
from mybuild.scheduling import SchedulingHook
from mybuild.splice import Splice
from mmspec.spec.adapter import Adapter

from mybuild.{store_module} import {store_class}

ADAPTER = Adapter(
    name="student",
    processor=Processor,
    hasher=Hasher,
    encoder=ToyEncoder,
    encoder_cache_manager=EncoderCacheManager,
    splice=Splice,
    scheduling_hook=SchedulingHook,
    block_hasher=BlockHasher,
    worker_store={store_class},
)
"""


def _course_rubric(folder: Path) -> Path:
    """The default rubric with its content-hashing item (graded by ``ONLY``'s
    hash_count_mismatch_rejected) hidden and renamed."""
    text = (ROOT / "rubrics" / "default.toml").read_text(encoding="utf-8")
    start = text.index('[[items]]\nname = "Content hashing: framing')
    end = text.find("[[items]]", start + 1)
    end = len(text) if end < 0 else end
    item = re.sub(r'name = "[^"]*"', f'name = "{HIDDEN_NAME}"', text[start:end], count=1)
    item = item.replace('visibility = "visible"', 'visibility = "hidden"', 1)
    rubric = folder / "course.toml"
    rubric.write_text(text[:start] + item + text[end:], encoding="utf-8")
    return rubric


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("kit")
    rubric = _course_rubric(folder)
    return make_kit.build(folder / "kit.zip", rubric=str(rubric)), rubric


def test_the_kit_hands_out_no_answer_key(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    kit, rubric = built
    with zipfile.ZipFile(kit) as archive:
        files = {info.filename: archive.read(info) for info in archive.infolist()}
    names = [name.split("/", 1)[1] for name in files]
    assert all(name.startswith(f"{make_kit.TOP}/") for name in files)
    for forbidden in ("reference/", "adapters/zoo/", "tests/", "gradescope/",
                      "properties/models/", "properties/oracles.py",
                      "properties/differential.py", "exhaustive/check.py"):
        assert not [n for n in names if n.startswith(forbidden)], forbidden
    assert "grading.env" not in names and not any(n.endswith("/grading.env") for n in names)
    for expected in ("SPEC.md", "spec/SPEC.md", "spec/components.py", "grade.py",
                     "adapters/template/adapter.py", "rubrics/default.toml",
                     "docs/grading.md", "requirements.txt", "README.md"):
        assert expected in names, expected
    for name, data in files.items():
        assert HIDDEN_NAME.encode() not in data, name
        assert not re.search(rb"^SEED=", data, re.MULTILINE), name
    public = files[f"{make_kit.TOP}/rubrics/default.toml"].decode()
    assert 'visibility = "hidden"' not in public
    # the hidden tests are marked, each one: the items whose properties need the reference
    marked = load_rubric(str(rubric))
    hidden = set(make_kit.autograder_only(marked))
    in_kit = parse_rubric(public, "kit")
    assert {i.name for i in in_kit.items if i.autograder_only} == hidden - {HIDDEN_NAME}
    assert "Done 4: eviction" in hidden and "Worker store: drop, store, serve" not in hidden
    assert public.count("[[items]]") == (ROOT / "rubrics" / "default.toml").read_text(
        encoding="utf-8"
    ).count("[[items]]") - 1
    # reproducible, like the Gradescope bundle
    again = make_kit.build(tmp_path / "again.zip", rubric=str(rubric))
    assert again.read_bytes() == kit.read_bytes()


def _submission(folder: Path, buggy: bool) -> Path:
    """The reference's modules as the student's package ``mybuild``; ``buggy``: with
    the zoo's worker store that keeps freed hashes. It imports the spec as an installed
    adapter does, ``mmspec.spec``: one adapter serves the kit, the checkout's grader (and
    the wheel and the autograder: tests/test_wheel.py, tests/test_grading_gradescope.py;
    issue 33, item 5), its errors the very classes the grader checks against."""
    package = folder / "mybuild"
    package.mkdir(parents=True)
    sources = sorted((ROOT / "reference").glob("*.py"))
    if buggy:
        sources.append(ROOT / "adapters" / "zoo" / "worker_keeps_freed.py")
    for source in sources:
        text = source.read_text(encoding="utf-8")
        text = re.sub(r"^from reference\.", "from mybuild.", text, flags=re.MULTILINE)
        text = re.sub(r"^from spec\.", "from mmspec.spec.", text, flags=re.MULTILINE)
        assert not re.search(r"^(from|import) (reference|spec)\b", text, re.MULTILINE), source
        (package / source.name).write_text(text, encoding="utf-8")
    (package / "__init__.py").write_text("", encoding="utf-8")
    store = ("worker_keeps_freed", "KeepsFreedWorkerStore") if buggy else (
        "worker", "WorkerStore"
    )
    adapter = folder / "adapter.py"
    adapter.write_text(
        ADAPTER.format(store_module=store[0], store_class=store[1]), encoding="utf-8"
    )
    return adapter


def _grade(
    command: list[str], cwd: Path, out: Path, pythonpath: str | None
) -> subprocess.Popen[str]:
    """Start one grading run (the kit's and the full grader's run side by side)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MMSPEC_HOME")}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return subprocess.Popen(
        [*command, "--profile", "ci", "--seed", SEED, "--only", *ONLY,
         "--format", "json", "--out", str(out), "--quiet"],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _report(run: subprocess.Popen[str], out: Path) -> dict[str, Any]:
    _stdout, stderr = run.communicate(timeout=300)
    assert run.returncode in (0, 1), stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return report


@pytest.mark.parametrize("buggy", [False, True], ids=["correct", "worker_keeps_freed"])
def test_the_kit_and_the_full_grader_agree(
    built: tuple[Path, Path], tmp_path: Path, buggy: bool
) -> None:
    kit_zip, rubric = built
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(kit_zip) as archive:
        archive.extractall(unpacked)
    kit = unpacked / make_kit.TOP
    assert ROOT not in kit.resolve().parents
    adapter = _submission(tmp_path / "submission", buggy)
    # both isolated, as the autograder and a student run them (the kit with reproducers
    # asked for; the full grader without, to save time)
    kit_run = _grade([sys.executable, "grade.py", str(adapter)], kit, tmp_path / "kit.json", None)
    full_run = _grade(
        [sys.executable, "-m", "properties", "grade", str(adapter), "--rubric", str(rubric),
         "--no-reproducers"],
        ROOT, tmp_path / "full.json", str(ROOT),
    )
    ours, full = _report(kit_run, tmp_path / "kit.json"), _report(full_run, tmp_path / "full.json")
    shutil.rmtree(unpacked)  # nothing below needs it

    assert ours["components"]["item_cache"].startswith("needs the reference")
    assert full["components"]["item_cache"] == "reference"  # it stands in there
    full_items = {item["name"]: item for item in full["items"]}
    assert HIDDEN_NAME in full_items  # the course's hidden item, graded by the full grader
    assert HIDDEN_NAME not in {item["name"] for item in ours["items"]}
    statuses: dict[str, str] = {}
    for item in ours["items"]:
        theirs = full_items[item["name"]]
        statuses[item["name"]] = item["status"]
        if item["status"] == "needs the reference":
            assert item["score"] == 0 and "graded on the autograder" in item["summary"]
            assert theirs["status"] != "needs the reference"
            continue
        assert (item["status"], item["score"]) == (theirs["status"], theirs["score"]), item
        assert [(f["property"], f["clause"], f["message"], f["steps"]) for f in item["failures"]] \
            == [(f["property"], f["clause"], f["message"], f["steps"]) for f in theirs["failures"]]
        for failure in item["failures"]:
            assert failure["reproducer"] is None
            assert "the student kit has no reference" in failure["reproducer_note"]

    identity = "Prefix caching, optional: every kind of identity"
    public = {"Worker store: drop, store, serve", identity, "Toy encoder: shape and batching"}
    assert {name for name, status in statuses.items() if status != "needs the reference"} \
        == public
    expansion = "Done 1: expansion arithmetic"  # a hidden item: it needs the oracles
    assert statuses[expansion] == "needs the reference"
    assert "a hidden item" in next(i for i in ours["items"] if i["name"] == expansion)["summary"]
    assert full_items[expansion]["status"] == "passed"
    assert statuses[identity] == "passed"
    assert statuses["Toy encoder: shape and batching"] == "passed"
    store = "Worker store: drop, store, serve"
    if buggy:
        assert statuses[store] == "failed"
        assert "WRK-2" in [f["clause"] for f in full_items[store]["failures"]]
    else:
        assert statuses[store] == "passed"


def _in_kit(kit: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MMSPEC_HOME")}
    return subprocess.run(
        [sys.executable, *args], cwd=kit, env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )


def test_the_kit_says_where_its_hidden_items_are_graded(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    """Every way into a hidden item reads "needs the reference", graded on the autograder:
    its row and section of the report, --exhaustive, verify and list."""
    kit_zip, _rubric = built
    with zipfile.ZipFile(kit_zip) as archive:
        archive.extractall(tmp_path)
    kit = tmp_path / make_kit.TOP
    template = "adapters/template/adapter.py"
    graded = _in_kit(kit, "grade.py", template, "--only", "ECM-5", "EncoderCacheMachine",
                     "enc_output_shape", "--profile", "ci", "--quiet")
    assert graded.returncode == 1, graded.stderr[-3000:]
    report = graded.stdout
    assert "== needs the reference: graded on the autograder (0 points here) ==" in report
    assert (
        "4. Done 4: eviction: ECM-4, ECM-5, ECM-7: a hidden item, which needs the reference "
        "(not in the student kit): graded on the autograder"
    ) in report
    assert re.search(r"Done 4: eviction +0/10 +needs the reference", report), report
    assert re.search(r"Toy encoder: shape and batching +0/2 +not provided", report), report
    helped = _in_kit(kit, "grade.py", "--help")  # issue 33, item 8: named as it is run
    assert helped.returncode == 0 and helped.stdout.startswith("usage: python grade.py ")
    exhaustive = _in_kit(kit, "grade.py", template, "--exhaustive", "bounded")
    assert exhaustive.returncode == 2
    assert "needs the reference (not in the student kit): they are graded on the autograder" \
        in exhaustive.stderr
    verify = _in_kit(kit, "-m", "properties", "verify", "--adapter", template, "--only",
                     "ECM-5", "enc_output_shape")
    assert verify.returncode == 2
    assert "ECM-5: needs the reference (not in the student kit): graded on the autograder" \
        in verify.stderr
    everything = _in_kit(kit, "-m", "properties", "verify", "--adapter", template)
    assert everything.returncode == 0, everything.stderr[-3000:]  # the kit's own: not provided
    assert "clauses are graded on the autograder, each needs the reference (not in the " \
        "student kit): EXP-1, " in everything.stderr
    assert "ECM-5" not in everything.stdout and "enc_output_shape" in everything.stdout
    listed = _in_kit(kit, "-m", "properties", "list")
    assert listed.returncode == 0, listed.stderr
    assert "EncoderCacheMachine (needs the reference (not in the student kit))" in listed.stdout
    assert "(MISSING)" not in listed.stdout

"""The student kit (``make student-kit``, docs/grading.md "The student kit").

The kit is built from this checkout with a course rubric holding one hidden item, then
checked for what it must not hand out (reference/, the zoo, the hidden item, a seed).
It is unpacked into a folder outside the checkout, and two submissions — the reference's
code copied into the submission as the student's own package ``mybuild`` (imports
rewritten), and the same with one zoo bug applied (``ecm_newest_first_eviction``) — are
graded by the kit's runner and by the full grader of the checkout under the same seed,
profile and ``--only``. The verdicts agree on every item the kit judges; the item that
needs the reference (SPL-5's splice uses a processor the submission lacks) reads "needs
the reference" in the kit, with 0 points, and is judged by the full grader.
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

from studentkit import make_kit
from tests.conftest import ROOT

HIDDEN_NAME = "Zq47 secret item: reset"
#: Properties graded (``--only``): the items holding them run, each in both graders.
ONLY = ("EncoderCacheMachine", "spl_injection_commutes", "sch_doorstep_truncation")
SEED = "3"
ADAPTER = """\
from mybuild.hasher import Hasher
from mybuild.scheduling import SchedulingHook
from mybuild.splice import Splice
from spec.adapter import Adapter

from mybuild.{cache_module} import {cache_class}

ADAPTER = Adapter(
    name="student",
    hasher=Hasher,
    encoder_cache_manager={cache_class},
    splice=Splice,
    scheduling_hook=SchedulingHook,
)
"""


def _course_rubric(folder: Path) -> Path:
    """The default rubric with its encoder-cache reset item (graded by ``ONLY``'s
    EncoderCacheMachine) hidden and renamed."""
    text = (ROOT / "rubrics" / "default.toml").read_text(encoding="utf-8")
    start = text.index('[[items]]\nname = "Encoder cache, optional: reset')
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
    for forbidden in ("reference/", "adapters/zoo/", "tests/", "gradescope/"):
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
    assert public.count("[[items]]") == (ROOT / "rubrics" / "default.toml").read_text(
        encoding="utf-8"
    ).count("[[items]]") - 1
    # reproducible, like the Gradescope bundle
    again = make_kit.build(tmp_path / "again.zip", rubric=str(rubric))
    assert again.read_bytes() == kit.read_bytes()


def _submission(folder: Path, buggy: bool) -> Path:
    """The reference's modules as the student's package ``mybuild``; ``buggy``: with
    the zoo's newest-first eviction as its cache manager."""
    package = folder / "mybuild"
    package.mkdir(parents=True)
    sources = sorted((ROOT / "reference").glob("*.py"))
    if buggy:
        sources.append(ROOT / "adapters" / "zoo" / "ecm_newest_first_eviction.py")
    for source in sources:
        text = source.read_text(encoding="utf-8")
        text = re.sub(r"^from reference\.", "from mybuild.", text, flags=re.MULTILINE)
        assert not re.search(r"^(from|import) reference\b", text, re.MULTILINE), source
        (package / source.name).write_text(text, encoding="utf-8")
    (package / "__init__.py").write_text("", encoding="utf-8")
    cache = ("ecm_newest_first_eviction", "NewestFirstEviction") if buggy else (
        "encoder_cache", "EncoderCacheManager"
    )
    adapter = folder / "adapter.py"
    adapter.write_text(
        ADAPTER.format(cache_module=cache[0], cache_class=cache[1]), encoding="utf-8"
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


@pytest.mark.parametrize("buggy", [False, True], ids=["correct", "newest_first_eviction"])
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

    assert ours["components"]["processor"].startswith("needs the reference")
    assert full["components"]["processor"] == "reference"
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

    splice = "Splice: rows in order, injection commutes"
    assert statuses[splice] == "needs the reference"  # SPL-5 uses a processor
    assert full_items[splice]["status"] == "passed"
    assert statuses["Lab 3: an unaffordable image stops the chunk at its doorstep"] == "passed"
    assert statuses["Encoder cache: slot accounting and references"] == "passed"
    eviction = "Done 4: eviction"
    if buggy:
        assert statuses[eviction] == "failed"
        assert [f["clause"] for f in full_items[eviction]["failures"]] == ["ECM-5"]
    else:
        assert statuses[eviction] == "passed"

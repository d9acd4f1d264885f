"""The student kit holds no answer key (issue 33, item 2; docs/grading.md "The student kit").

The kit is built from this checkout and unpacked outside it. Every class of every
``.py`` file it ships is found (``tests/fixtures/kit_glue/discover.py``, run with the
kit's own modules), and each class that offers at least half of a component's Protocol
is glued into an adapter for that component (``tests/fixtures/kit_glue/glue.py``: the
glue a student would write, done mechanically — members found by name, arguments by
parameter name, results converted to the declared type). Each such adapter is graded

- by the kit's own ``grade.py`` in the kit's folder, on the kit's public rubric; and
- by the checkout's full grader (models and reference at hand), on the properties whose
  main subject the adapter provides (not the engine machines, whose credit for a cache
  manager alone is the reference's engine loop), the autograder-only items included —

and must score 0 on every item, pass none. A positive control shows the glue finds an
answer key where there is one: the checkout's own encoder cache model, glued the same
way, passes the eviction item.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from harness.catalog import registered_properties
from harness.grading.rubric import load_rubric
from studentkit import make_kit
from tests.conftest import FIXTURES, ROOT

GLUE = FIXTURES / "kit_glue"
#: Each grading run's wall-clock limit (they take seconds).
TIMEOUT = 240

_ADAPTER = """\
from glue import adapter

ADAPTER = adapter({name!r}, {classes!r})
"""


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("kit")
    with zipfile.ZipFile(make_kit.build(folder / "kit.zip")) as archive:
        archive.extractall(folder / "unpacked")
    unpacked = folder / "unpacked" / make_kit.TOP
    assert ROOT not in unpacked.resolve().parents
    return unpacked


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MMSPEC_HOME")}


def _discover(kit: Path, out: Path) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, str(GLUE / "discover.py"), str(kit), str(out)],
        cwd=kit, env=_clean_env(), capture_output=True, text=True, timeout=TIMEOUT,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    found: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return found


def _adapters(candidates: list[dict[str, Any]], folder: Path) -> list[tuple[Path, list[str]]]:
    """One adapter per module, its candidate classes each behind the components it fits
    (a class fit for a component already taken goes into another adapter)."""
    folder.mkdir()
    shutil.copy(GLUE / "glue.py", folder / "glue.py")
    packed: list[tuple[str, dict[str, list[str]]]] = []
    for candidate in candidates:
        wanted = set(candidate["components"])
        classes = next(
            (
                classes for module, classes in packed
                if module == candidate["module"]
                and not wanted & {c for cs in classes.values() for c in cs}
            ),
            None,
        )
        if classes is None:
            classes = {}
            packed.append((candidate["module"], classes))
        classes[f"{candidate['module']}:{candidate['class']}"] = candidate["components"]
    adapters = []
    for number, (module, classes) in enumerate(packed, 1):
        path = folder / f"glued_{number}.py"
        path.write_text(_ADAPTER.format(name=f"glued {module}", classes=classes), encoding="utf-8")
        adapters.append((path, sorted({c for cs in classes.values() for c in cs})))
    return adapters


def _start(
    command: list[str], cwd: Path, out: Path, env: dict[str, str]
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*command, "--profile", "ci", "--in-process", "--format", "json", "--out", str(out),
         "--quiet"],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _report(run: subprocess.Popen[str], out: Path) -> dict[str, Any] | None:
    """The report; ``None`` for an adapter that does not load (the grader scores it 0:
    a glued class lacking a property the Protocol needs, such as the template's stubs)."""
    _stdout, stderr = run.communicate(timeout=TIMEOUT)
    if run.returncode == 2 and "cannot load adapter" in stderr:
        return None
    assert run.returncode in (0, 1), stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    assert report["items"]
    return report


def _own_properties(provided: list[str]) -> list[str]:
    """The properties whose main subject (the component they are about, the first) the
    adapter provides: what they credit is its own, also where the reference stands in
    for a component they use (a scheduling hook's cache manager). Left out: the engine
    machines for an adapter without an engine loop, which credit the reference's loop."""
    return [
        name for name, spec in registered_properties().items() if spec.subject[0] in provided
    ]


def _scored(report: dict[str, Any] | None) -> list[str]:
    if report is None:
        return []
    return [
        f"{item['name']}: {item['status']}, {item['score']}/{item['points']}"
        for item in report["items"]
        if item["score"] != 0 or item["status"] == "passed"
    ]


def test_no_class_the_kit_ships_scores(kit: Path, tmp_path: Path) -> None:
    found = _discover(kit, tmp_path / "classes.json")
    assert len(found["classes"]) > 20  # it did look: the kit's harness alone has dozens
    candidates = found["candidates"]
    for candidate in candidates:  # the full grader below grades the kit's very file
        assert (kit / candidate["file"]).read_bytes() == (ROOT / candidate["file"]).read_bytes()
    adapters = _adapters(candidates, tmp_path / "glued")
    assert adapters, "the kit ships no class fit for any component: not even the template?"
    full_env = {**_clean_env(), "PYTHONPATH": str(ROOT)}
    runs = []
    for path, provided in adapters:
        kit_out, full_out = path.with_suffix(".kit.json"), path.with_suffix(".full.json")
        kit_run = _start([sys.executable, "grade.py", str(path)], kit, kit_out, _clean_env())
        own = _own_properties(provided)
        assert own, provided  # every component is the main subject of some property
        full_run = _start(
            [sys.executable, "-m", "properties", "grade", str(path), "--no-reproducers",
             "--only", *own],
            ROOT, full_out, full_env,
        )
        runs.append((path, (kit_run, kit_out), (full_run, full_out)))
    scored: list[str] = []
    for path, (kit_run, kit_out), (full_run, full_out) in runs:
        ours, full = _report(kit_run, kit_out), _report(full_run, full_out)
        who = path.read_text(encoding="utf-8").strip().splitlines()[-1]  # ADAPTER = ...
        scored += [f"kit: {who}: {s}" for s in _scored(ours)]
        scored += [f"full grader: {who}: {s}" for s in _scored(full)]
    assert not scored, "the student kit ships an answer key:\n" + "\n".join(scored)


def test_the_glue_finds_an_answer_key_where_there_is_one(tmp_path: Path) -> None:
    """The positive control: the checkout's encoder cache model, glued as the kit's
    classes are, passes the eviction item (what issue 33 found in the kit)."""
    shutil.copy(GLUE / "glue.py", tmp_path / "glue.py")
    adapter = tmp_path / "model.py"
    adapter.write_text(
        _ADAPTER.format(
            name="glued model",
            classes={"properties.models.encoder_cache:EncoderCacheModel": [
                "encoder_cache_manager"
            ]},
        ),
        encoding="utf-8",
    )
    out = tmp_path / "model.json"
    run = _start(
        [sys.executable, "-m", "properties", "grade", str(adapter), "--no-reproducers",
         "--only", "EncoderCacheMachine"],
        ROOT, out, {**_clean_env(), "PYTHONPATH": str(ROOT)},
    )
    report = _report(run, out)
    assert report is not None
    statuses = {item["name"]: item["status"] for item in report["items"]}
    assert statuses["Done 4: eviction"] == "passed", statuses
    assert statuses["Encoder cache: slot accounting and references"] == "passed", statuses


def test_the_default_rubric_marks_exactly_the_hidden_items() -> None:
    """rubrics/default.toml's autograder_only items are those a property of which needs
    the reference (what make_kit marks in the kit's public rubric, marked or not)."""
    rubric = load_rubric(ROOT / "rubrics" / "default.toml")
    marked = [item.name for item in rubric.items if item.autograder_only]
    assert marked == make_kit.needing_the_reference(rubric)
    public = [item.name for item in rubric.items if not item.autograder_only]
    assert public == [
        "Toy encoder: shape and batching",
        "Prefix caching with pixels",
        "Worker store: drop, store, serve",
        "Worker store: is_embed gathers",
        "Worker store: chunks concatenate to the whole",
        "Prefix caching, optional: every kind of identity",
        "Content identity, optional: request-supplied identifiers",
        "Content identity, optional: processed features",
    ]  # docs/grading.md, "Public and hidden items", lists the same


def test_the_kit_holds_no_model_and_refuses_one() -> None:
    held = make_kit.kit_modules()
    assert "properties.encoder" in held and "harness.cli" in held
    assert not [m for m in held if m.startswith("properties.models") or m in (
        "properties.oracles", "properties.differential", "exhaustive.check", "harness.machines"
    )]
    for model in ("properties/models/encoder_cache.py", "properties/oracles.py",
                  "properties/differential.py"):
        assert make_kit.FORBIDDEN.search(model), model
    problems = make_kit._dangling(
        [
            ("harness/a.py", b"import properties.exp\n"),
            ("harness/b.py", b"def f():\n    from properties.models import engine\n"),
            ("harness/c.py", b"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                             b"    import exhaustive.check\n"),
        ],
        ROOT,
    )
    assert problems == [
        "harness.a imports properties, which the kit does not hold",
        "harness.a imports properties.exp, which the kit does not hold",
        "harness.b imports the model properties.models",
        "harness.b imports the model properties.models.engine",
    ]

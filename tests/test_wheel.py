"""The installable distribution (issue 21, docs/architecture.md "Installed"): the wheel
carries the checkout's folders as ``mmspec.*``, its imports rewritten by setup.py's hook,
and works from any folder beside unrelated top-level packages named ``spec`` and
``properties``, neither shadowing the other.

The first tests check the build hook's pieces in process. The last builds the wheel
from a copy of the tracked files (a clean clone), offline (``pip wheel
--no-build-isolation`` with this interpreter's setuptools, which requirements.txt pins),
installs it with ``pip install --target`` into a folder that is the only entry of
``PYTHONPATH``, and runs ``python -m mmspec`` there from a folder under /tmp. Without
the tooling it skips, saying why; where CI is set it fails instead.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from harness import names
from harness.report import EXAMPLE_REPLAY_HEADING
from spec.clauses import mmspec_version
from tests.conftest import ROOT
from tests.test_pytest_plugin import TEAM_CONFTEST, _outcomes

REQUIRED = bool(os.environ.get("CI"))


def _setup_module() -> ModuleType:
    """setup.py as a plain module (it builds only when run as ``__main__``)."""
    spec = importlib.util.spec_from_file_location("mmspec_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SETUP = _setup_module()


# --- the build hook ----------------------------------------------------------------------

SOURCE = '''"""Docs quote `from spec.types import Request`; so does a string below."""
from __future__ import annotations

import os
from spec.types import (
    Request,
)
from spec import errors
import numpy as np, spec.adapter
import reference.adapter as ref_adapter
from .sibling import thing
from specific.thing import other  # not ours: a root is matched whole

TEXT = "from harness.cli import main"


def later() -> None:
    from harness.cli import main  # noqa
    import properties
'''

EXPECTED = '''"""Docs quote `from spec.types import Request`; so does a string below."""
from __future__ import annotations

import os
from mmspec.spec.types import (
    Request,
)
from mmspec.spec import errors
import numpy as np; import mmspec.spec.adapter; from mmspec import spec
import mmspec.reference.adapter as ref_adapter
from .sibling import thing
from specific.thing import other  # not ours: a root is matched whole

TEXT = "from harness.cli import main"


def later() -> None:
    from mmspec.harness.cli import main  # noqa
    from mmspec import properties
'''


def test_the_hook_rewrites_import_statements_only_on_their_own_lines() -> None:
    rewritten = SETUP.rewrite_imports(SOURCE, "example.py")
    assert rewritten == EXPECTED
    assert len(rewritten.splitlines()) == len(SOURCE.splitlines())  # tracebacks keep lines


def test_the_hook_refuses_what_it_cannot_rewrite_or_the_wheel_lacks() -> None:
    with pytest.raises(SETUP.ImportRewriteError, match="does not carry"):
        SETUP.rewrite_imports("from fuzz.run import main\n", "x.py")
    with pytest.raises(SETUP.ImportRewriteError, match="does not carry"):
        SETUP.rewrite_imports("from tests.conftest import ROOT\n", "x.py")
    with pytest.raises(SETUP.ImportRewriteError, match="line of `from`"):
        SETUP.rewrite_imports("from \\\n    spec.types import Request\n", "x.py")


def test_the_shipped_files_hold_the_package_data_and_not_the_zoo() -> None:
    shipped = dict(SETUP.shipped_files(ROOT))
    assert shipped["spec/SPEC.md"] is False
    assert shipped["rubrics/default.toml"] is False
    assert shipped["adapters/vllm/expected/0.22.1.json"] is False
    assert shipped["adapters/template/adapter.py"] is True
    assert not [path for path in shipped if path.startswith("adapters/zoo")]
    assert "adapters/vllm/ci.py" not in shipped
    assert {path.split("/")[0] for path in shipped} == {*SETUP.ROOTS, "rubrics"}
    for path, is_module in shipped.items():  # what the build does to each module
        if is_module:
            SETUP.rewrite_imports((ROOT / path).read_text(encoding="utf-8"), path)


def test_in_the_checkout_module_names_are_top_level() -> None:
    assert names.PREFIX == "" and not names.INSTALLED
    assert names.HOME == names.IMPORT_ROOT == ROOT
    assert names.module("reference.adapter") == "reference.adapter"
    assert names.COMMAND == "python -m properties"


# --- the wheel, built, installed and run -------------------------------------------------


def _tooling_missing() -> str | None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return "not a git checkout (the wheel is built from `git ls-files`)"
    if importlib.util.find_spec("pip") is None:
        return "pip is not installed in this interpreter"
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        version = "none"
    if not version.split(".")[0].isdigit() or int(version.split(".")[0]) < 77:
        return (
            f"building the wheel offline needs setuptools>=77 in this interpreter (found "
            f"{version}); requirements.txt pins it: `make .venv`"
        )
    return None


def _run(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _clean_copy(target: Path) -> None:
    """The tracked files of the checkout, as a fresh clone has them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode("utf-8")
    for relative in filter(None, listed.split("\0")):
        source = ROOT / relative
        if source.is_file() and not source.is_symlink():
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)


TINY = '''"""A tiny adapter written against the installed package: the reference's splice."""
from mmspec.reference.splice import Splice
from mmspec.spec.adapter import Adapter

ADAPTER = Adapter(name="tiny", splice=Splice)
'''

EMPTY_NOOP = '''"""A splice that ignores an empty embedding list (breaks SPL-4)."""
from mmspec.reference.splice import Splice
from mmspec.spec.adapter import Adapter


class EmptyNoop(Splice):
    def merge(self, inputs_embeds, mm_embeds, is_multimodal):
        if len(mm_embeds) == 0:
            return inputs_embeds
        return super().merge(inputs_embeds, mm_embeds, is_multimodal)


ADAPTER = Adapter(name="empty-noop", splice=EmptyNoop)
'''

PROBE = '''
import sys
from pathlib import Path
import spec, properties
import mmspec, mmspec.harness.cli, mmspec.adapters.release_wheel as release_wheel
from mmspec.harness import names, profiles, declared
from mmspec.harness.grading import rubric
assert spec.FAKE == "spec" and properties.FAKE == "properties", (spec, properties)
ours = [m for m in ("harness", "reference", "exhaustive", "contracts", "adapters")
        if m in sys.modules]
assert not ours, ours  # nothing of ours imported under a bare name
assert names.PREFIX == "mmspec." and names.COMMAND == "python -m mmspec"
assert names.IMPORT_ROOT == Path(mmspec.__file__).resolve().parents[1]
assert rubric.DEFAULT_RUBRIC.is_file() and (declared.EXPECTED_DIR / "0.22.1.json").is_file()
assert profiles.EXAMPLES_ROOT == Path.cwd() / ".hypothesis" / "examples"
assert release_wheel.CACHE_ROOT == Path.cwd()  # never inside the installed package
import mmspec.machines
from mmspec.reference.encoder_cache import EncoderCacheManager
Machine = mmspec.machines.encoder_cache(EncoderCacheManager, reset=True)
assert Machine.TestCase and mmspec.machines.mmspec_settings(Machine).max_examples == 200
# a floor of 200 programs, not a multiple: grading's 200 and thorough's 2000 are kept
assert [mmspec.machines.mmspec_settings(Machine, p).max_examples
        for p in ("grading", "thorough")] == [200, 2000]
print("version", mmspec.__version__)
'''


def test_the_wheel_installs_beside_unrelated_spec_and_properties(tmp_path: Path) -> None:
    missing = _tooling_missing()
    if missing:
        if REQUIRED:
            pytest.fail(missing + " (required where CI is set)")
        pytest.skip(missing)
    source, dist, site, work = (tmp_path / n for n in ("src", "dist", "site", "work"))
    for folder in (dist, site, work):
        folder.mkdir()
    _clean_copy(source)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "MMSPEC_HOME", "HYPOTHESIS_PROFILE",
                        "MMSPEC_EXAMPLES_DIR", "MMSPEC_REDIS_URL")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", str(source), "-w", str(dist)],
        cwd=tmp_path, env=env, timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("mmspec-*.whl")
    assert wheel.stat().st_size > 100_000, wheel.stat().st_size
    with zipfile.ZipFile(wheel) as archive:
        files = archive.namelist()
    assert not [f for f in files if "zoo" in f.split("/")], "the zoo is in the wheel"
    assert {f.split("/")[0] for f in files} == {"mmspec", f"mmspec-{mmspec_version()}.dist-info"}
    for wanted in ("mmspec/__init__.py", "mmspec/__main__.py", "mmspec/spec/SPEC.md",
                   *(f"mmspec/{root}/__init__.py" for root in SETUP.ROOTS)):
        assert wanted in files, wanted

    # the sdist (what `python -m build` builds the wheel from) hands out no more
    build_sdist = (
        "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
    )
    sdist = _run([sys.executable, "-c", build_sdist, str(dist)], cwd=source, env=env)
    assert sdist.returncode == 0, sdist.stdout + sdist.stderr
    with tarfile.open(dist / sdist.stdout.split()[-1]) as archive:
        packed = {name.split("/", 1)[-1] for name in archive.getnames()}
    assert {"setup.py", "spec/SPEC.md", "harness/names.py", "rubrics/default.toml"} <= packed
    assert not [name for name in packed if name.startswith(("adapters/zoo", "tests"))]

    installed = _run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
         "--target", str(site), str(wheel)],
        cwd=tmp_path, env=env,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    for fake in ("spec", "properties"):  # unrelated packages of the same top-level names
        (site / fake).mkdir()
        (site / fake / "__init__.py").write_text(f"FAKE = {fake!r}\n", encoding="utf-8")
    (work / "tiny.py").write_text(TINY, encoding="utf-8")
    (work / "empty_noop.py").write_text(EMPTY_NOOP, encoding="utf-8")
    env["PYTHONPATH"] = str(site)  # the installed folder only, never the checkout
    python = [sys.executable]

    probe = _run([*python, "-c", PROBE], cwd=work, env=env)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert f"version {mmspec_version()}" in probe.stdout

    version = _run([str(site / "bin" / "mmspec"), "--version"], cwd=work, env=env)
    assert version.returncode == 0, version.stdout + version.stderr
    assert version.stdout.startswith(f"mmspec {mmspec_version()} (SPEC.md digest ")

    listed = _run([*python, "-m", "mmspec", "list"], cwd=work, env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "spl_no_broadcast" in listed.stdout and "[mmspec.properties." in listed.stdout

    verified = _run(
        [*python, "-m", "mmspec", "verify", "--only", "SPL-4", "--profile", "dev"],
        cwd=work, env=env,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "SPL-4" in verified.stdout and "1 pass" in verified.stdout

    # a zoo entry of the checkout given by path (the wheel carries no zoo): it imports the
    # checkout's `reference`, and the one-line message says so and where it runs
    zoo = ROOT / "adapters" / "zoo" / "hash_by_length.py"
    foreign = _run([*python, "-m", "mmspec", "verify", "--adapter", str(zoo), "--only", "HASH-2"],
                   cwd=work, env=env)
    assert foreign.returncode == 2, foreign.stdout + foreign.stderr
    assert "No module named 'reference'" in foreign.stdout + foreign.stderr
    assert "installed mmspec has it as `mmspec.reference`" in foreign.stdout + foreign.stderr
    assert f"cd {ROOT} && PYTHONPATH=. python -m properties verify --adapter " \
        "adapters/zoo/hash_by_length.py" in foreign.stdout + foreign.stderr

    graded = _run([*python, "-m", "mmspec", "grade", "tiny.py", "--only", "SPL-4"],
                  cwd=work, env=env)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert "mmspec grade: 10/10" in graded.stdout  # in the isolated child (-m mmspec...)

    # a failure's replay line runs from another folder, as printed
    failing = _run(
        [*python, "-m", "mmspec", "verify", "--adapter", str(work / "empty_noop.py"),
         "--only", "SPL-4"],
        cwd=work, env=env,
    )
    assert failing.returncode == 1, failing.stdout + failing.stderr
    lines = failing.stdout.splitlines()
    replay = lines[lines.index("replay:") + 1].strip()
    assert f"{python[0]} -m mmspec verify --adapter {work / 'empty_noop.py'}" in replay
    again = _run(["bash", "-c", replay], cwd=tmp_path, env=env)  # pasted, as printed
    assert again.returncode == 1, again.stdout + again.stderr
    assert "FAIL" in again.stdout
    one = lines[lines.index(EXAMPLE_REPLAY_HEADING) + 1].strip()
    example = _run(["bash", "-c", one], cwd=tmp_path, env=env)
    assert example.returncode == 1, example.stdout + example.stderr
    row = next(line for line in example.stdout.splitlines() if line.startswith("SPL-4"))
    assert row.split()[2:4] == ["1", "FAIL"]  # the one shrunk test case, failing again

    # a graded failure's reproducer: verified by the grader, and run from elsewhere
    regraded = _run(
        [*python, "-m", "mmspec", "grade", "empty_noop.py", "--only", "SPL-4",
         "--reproducers", "repro"],
        cwd=work, env=env,
    )
    assert regraded.returncode == 1, regraded.stdout + regraded.stderr
    assert "python -m mmspec grade empty_noop.py --only spl_no_broadcast" in regraded.stdout
    assert "verified, it ends in REPRODUCED" in regraded.stdout
    (script,) = (work / "repro").glob("repro_*.py")
    reproduced = _run([*python, str(script), str(work / "empty_noop.py")],
                      cwd=tmp_path, env=env)
    assert reproduced.returncode == 1, reproduced.stdout + reproduced.stderr
    assert "REPRODUCED: step 1" in reproduced.stderr
    fixed = _run([*python, str(script), "reference"], cwd=tmp_path, env=env)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr

    # the engine team's example (docs/architecture.md, "The pytest plugin"): one test file,
    # the plugin loaded by its pytest11 entry point, one item per (clause, property)
    engine = tmp_path / "engine"
    engine.mkdir()
    (engine / "test_mmspec.py").write_text(PLUGIN_EXAMPLE, encoding="utf-8")
    (engine / "newest_first.py").write_text(_as_installed(NEWEST_FIRST), encoding="utf-8")
    select = ["-k", "ECM-5 or SPL-4", "-p", "no:cacheprovider", "-q"]
    passing = _run([*python, "-m", "pytest", "--mmspec-adapter=reference", *select],
                   cwd=engine, env=env, timeout=300)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "2 passed" in passing.stdout, passing.stdout
    buggy = _run([*python, "-m", "pytest", "--mmspec-adapter=newest_first.py", *select,
                  "--junitxml", str(engine / "junit.xml")],
                 cwd=engine, env=env, timeout=300)
    assert buggy.returncode == 1, buggy.stdout + buggy.stderr
    assert "FAILED test_mmspec.py::test_clause[ECM-5:EncoderCacheMachine]" in buggy.stdout
    assert "1 failed, 1 skipped" in buggy.stdout, buggy.stdout  # SPL-4: splice not provided
    junit = (engine / "junit.xml").read_text(encoding="utf-8")
    assert 'name="test_clause[ECM-5:EncoderCacheMachine]"' in junit and "<failure" in junit
    # the same under pytest-xdist (a team's `pytest -n 2`): the workers share the runs
    # through the run's temporary folder, and the outcomes are the one process's
    shared = _run([*python, "-m", "pytest", "--mmspec-adapter=newest_first.py", *select,
                   "-n", "2", "--junitxml", str(engine / "xdist.xml")],
                  cwd=engine, env=env, timeout=300)
    assert shared.returncode == 1, shared.stdout + shared.stderr
    assert "FAILED test_mmspec.py::test_clause[ECM-5:EncoderCacheMachine]" in shared.stdout
    assert _outcomes(engine / "xdist.xml") == _outcomes(engine / "junit.xml")
    assert "replay:" in (engine / "xdist.xml").read_text(encoding="utf-8")

    # beside the team's own Hypothesis profile named ci (issue 33, item 1): the team's stays
    # its own, and mmspec's verdicts and example counts are the same with and without it
    (engine / "conftest.py").write_text(TEAM_CONFTEST, encoding="utf-8")
    (engine / "test_team.py").write_text(TEAM_TEST, encoding="utf-8")
    team = ["-k", "SPL-1 or team_profile", "-p", "no:cacheprovider", "-q"]
    seen = []
    for extra in ([], ["--hypothesis-profile=ci"]):
        run = _run([*python, "-m", "pytest", "--mmspec-adapter=reference", *team, *extra,
                    "--junitxml", str(engine / "team.xml")], cwd=engine, env=env, timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        seen.append(_outcomes(engine / "team.xml"))
    assert seen[0] == seen[1], seen
    assert seen[0]["test_clause[SPL-1:spl_text_rows_untouched]"][1]["mmspec_examples"] == "100"
    # a team whose worker keeps its own cache (SGLang's design, issue 34): it declares so,
    # and the installed plugin skips WRK-1 with the reason while WRK-3 judges its gathers
    (engine / "own_cache.py").write_text(_as_installed(SELF_MANAGED), encoding="utf-8")
    own = _run([*python, "-m", "pytest", "--mmspec-adapter=own_cache.py", "-k",
                "WRK-1 or WRK-3", "-p", "no:cacheprovider", "-q", "-rs"],
               cwd=engine, env=env, timeout=300)
    assert own.returncode == 0, own.stdout + own.stderr
    assert "1 passed, 1 skipped" in own.stdout, own.stdout
    assert "keeps its own content-keyed cache" in own.stdout, own.stdout
    # a malformed adapter: one usage error (issue 33, item 4)
    (engine / "malformed.py").write_text(
        _as_installed(ROOT / "tests" / "fixtures" / "missing_method.py"), encoding="utf-8"
    )
    bad = _run([*python, "-m", "pytest", "--mmspec-adapter=malformed.py", "-p",
                "no:cacheprovider", "-q"], cwd=engine, env=env, timeout=300)
    assert bad.returncode == pytest.ExitCode.USAGE_ERROR, bad.stdout + bad.stderr
    assert (bad.stdout + bad.stderr).count("lacks method merge") == 1, bad.stdout + bad.stderr


TEAM_TEST = """\
from hypothesis import settings


def test_team_profile_is_untouched():
    assert settings.get_profile("ci").max_examples == settings().max_examples == 1000
"""

#: The whole of what an engine's repository adds (with mmspec installed).
PLUGIN_EXAMPLE = "from mmspec.harness.pytest_plugin import test_clause  # noqa: F401\n"
NEWEST_FIRST = ROOT / "adapters" / "zoo" / "ecm_newest_first_eviction.py"
SELF_MANAGED = ROOT / "tests" / "fixtures" / "self_managed_store.py"


def _as_installed(path: Path) -> str:
    """A zoo entry as an engine team would write it: importing ``mmspec.*``."""
    return re.sub(r"^(from|import) (spec|reference)\b", r"\1 mmspec.\2",
                  path.read_text(encoding="utf-8"), flags=re.M)

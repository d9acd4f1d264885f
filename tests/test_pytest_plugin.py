"""The pytest plugin inside someone else's pytest run (issue 33, items 1 and 4): it keeps
to mmspec's own Hypothesis settings without touching the caller's, and a malformed
adapter is one usage error. Each run is a fresh pytest in a temporary folder, the plugin
loaded by name from the checkout, as in an engine team's repository."""

from __future__ import annotations

import collections
import inspect
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import settings

from harness import profiles
from tests.conftest import FIXTURES, ROOT

# The team's own profile named like mmspec's, registered after the plugin is imported.
TEAM_CONFTEST = """\
from hypothesis import settings

settings.register_profile("ci", max_examples=1000, derandomize=False)
settings.load_profile("ci")
"""

TEAM_TESTS = """\
from hypothesis import settings

from harness.pytest_plugin import test_clause  # noqa: F401


def test_team_profile_is_untouched():
    ci = settings.get_profile("ci")
    assert (ci.max_examples, ci.derandomize) == (1000, False)
    assert settings.get_current_profile_name() == {loaded!r}
    assert settings().max_examples == {expected}
"""

#: One cheap clause of mmspec's and the team's own test.
SELECT = ("-k", "SPL-1 or team_profile")


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A fresh ``pytest -p harness.pytest_plugin ARGS`` in ``folder``, with nothing of
    this process's environment but the checkout on its path."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "harness.pytest_plugin", "-p",
         "no:cacheprovider", *args],
        cwd=folder, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=300, check=False,
    )


def _outcomes(junit: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """Each test case of a JUnit file: its outcome and its properties."""
    found: dict[str, tuple[str, dict[str, str]]] = {}
    for case in ET.parse(junit).iter("testcase"):
        outcome = next((c.tag for c in case if c.tag != "properties"), "passed")
        props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        found[case.get("name", "")] = (outcome, props)
    return found


@pytest.mark.parametrize(
    ("option", "loaded", "expected"),
    [(None, "ci", 1000), ("ci", "ci", 1000), ("default", "default", 100)],
)
def test_the_callers_profile_neither_changes_nor_is_changed(
    tmp_path: Path, option: str | None, loaded: str, expected: int
) -> None:
    (tmp_path / "conftest.py").write_text(TEAM_CONFTEST)
    (tmp_path / "test_engine.py").write_text(TEAM_TESTS.format(loaded=loaded, expected=expected))
    junit = tmp_path / "junit.xml"
    args = [f"--hypothesis-profile={option}"] if option else []
    done = _pytest(tmp_path, "--mmspec-adapter=reference", *SELECT, f"--junitxml={junit}", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _outcomes(junit) == {
        "test_team_profile_is_untouched": ("passed", {}),
        # mmspec's ci: derandomized, its own example count, whatever the caller loads.
        "test_clause[SPL-1:spl_text_rows_untouched]": (
            "passed",
            {"mmspec_verdict": "pass", "mmspec_profile": "ci",
             "mmspec_examples": str(profiles.profile_settings("ci").max_examples)},
        ),
    }


def test_importing_the_plugin_registers_no_profile() -> None:
    probe = textwrap.dedent("""\
        from hypothesis import settings
        from hypothesis.errors import InvalidArgument
        before = repr(settings.get_profile("ci")), settings.get_current_profile_name()
        import harness.pytest_plugin
        assert (repr(settings.get_profile("ci")), settings.get_current_profile_name()) == before
        for name in ("dev", "thorough", "mutation", "grading", "crosshair"):
            try:
                settings.get_profile(name)
            except InvalidArgument:
                continue
            raise AssertionError(name + " registered")
        """)
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env={"PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr


def test_profiles_set_every_field_so_no_loaded_profile_leaks_in() -> None:
    fields = {
        p.name for p in inspect.signature(settings.__init__).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert set(profiles._BASE) == fields
    usable = [p for p in profiles.PROFILES if p != "crosshair"]
    before = [repr(profiles.profile_settings(p)) for p in usable]
    previous = settings.get_current_profile_name()
    settings.register_profile(
        "wild", max_examples=7, derandomize=False, deadline=5, stateful_step_count=3,
        report_multiple_bugs=False, print_blob=False, phases=(), suppress_health_check=(),
    )
    try:
        settings.load_profile("wild")
        assert [repr(profiles.profile_settings(p)) for p in usable] == before
    finally:
        settings.load_profile(previous)


@pytest.mark.parametrize("named_by", ["option", "module"])
def test_a_malformed_adapter_is_one_usage_error(tmp_path: Path, named_by: str) -> None:
    adapter = FIXTURES / "missing_method.py"
    tests = "from harness.pytest_plugin import test_clause  # noqa: F401\n"
    args = [f"--mmspec-adapter={adapter}"]
    if named_by == "module":
        tests += f"MMSPEC_ADAPTER = {str(adapter)!r}\n"
        args = []
    (tmp_path / "test_engine.py").write_text(tests)
    junit = tmp_path / "junit.xml"
    done = _pytest(tmp_path, *args, f"--junitxml={junit}")
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert output.count("InjectOnlySplice lacks method merge") == 1, output
    assert output.count("cannot load adapter") == 1 and len(output.splitlines()) < 15, output
    # A CI reading the JUnit file still hears of it.
    [(name, (outcome, _))] = _outcomes(junit).items()
    assert (name, outcome) == ("adapter", "error")
    assert "InjectOnlySplice lacks method merge" in junit.read_text()


#: The reference with its encoder cache manager's and item cache's factories writing down
#: which process built each one: a machine that builds them ran in those processes (their
#: machines build nothing of each other's).
COUNTING_ADAPTER = """\
import os
from dataclasses import replace
from pathlib import Path

from reference.adapter import ADAPTER as REFERENCE

BUILDS = Path(__file__).with_name("builds.log")


def counted(kind, factory):
    def build(*args):
        with BUILDS.open("a") as log:
            log.write(f"{kind}:{os.getpid()}\\n")
        return factory(*args)

    return build


ADAPTER = replace(
    REFERENCE,
    name="counting",
    encoder_cache_manager=counted("ecm", REFERENCE.encoder_cache_manager),
    item_cache=counted("fic", REFERENCE.item_cache),
)
"""


def _machine_runs(builds: Path, kind: str) -> int:
    """How many processes ran the machine of ``kind``'s component: a run builds one per
    program (at least 100 in ``ci``), where loading the adapter builds one (the loader's
    check of each factory: at collection, and again in each process's own runs)."""
    per_process = collections.Counter(
        line for line in builds.read_text().split() if line.startswith(f"{kind}:")
    )
    assert per_process and min(per_process.values()) >= 1
    return sum(1 for count in per_process.values() if count >= 100)


def test_under_xdist_a_property_runs_once_for_all_workers(tmp_path: Path) -> None:
    """A team's ``pytest -n 2``: the clauses of one machine land on both workers (xdist's
    ``load`` sends items round robin), and each machine runs in one of them, once; the
    other reads that run. The outcomes are those of a run without xdist."""
    (tmp_path / "counting.py").write_text(COUNTING_ADAPTER)
    (tmp_path / "test_engine.py").write_text(
        "from harness.pytest_plugin import test_clause  # noqa: F401\n"
    )
    builds = tmp_path / "builds.log"
    select = ("--mmspec-adapter=counting.py", "-k", "EncoderCacheMachine or ItemCacheMachine")
    serial = _pytest(tmp_path, *select, f"--junitxml={tmp_path / 'serial.xml'}")
    assert serial.returncode == 0, serial.stdout + serial.stderr
    assert (_machine_runs(builds, "ecm"), _machine_runs(builds, "fic")) == (1, 1)
    builds.unlink()
    done = _pytest(tmp_path, *select, "-n", "2", "-v", f"--junitxml={tmp_path / 'xdist.xml'}")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "[gw0]" in output and "[gw1]" in output, output  # the rows went to both
    loaded = {line.split(":")[1] for line in builds.read_text().split()}
    assert len(loaded) == 2, output  # both workers loaded the adapter
    assert (_machine_runs(builds, "ecm"), _machine_runs(builds, "fic")) == (1, 1), output
    assert _outcomes(tmp_path / "xdist.xml") == _outcomes(tmp_path / "serial.xml")


def test_a_pass_on_less_than_the_clause_says_so_in_the_junit_file(tmp_path: Path) -> None:
    """PFX-7 on a block hasher whose identity_kinds() leaves a kind out passes on the kinds
    drawn, and the item's JUnit properties say which were left out (the report's words)."""
    (tmp_path / "test_engine.py").write_text(
        "from harness.pytest_plugin import test_clause  # noqa: F401\n"
    )
    junit = tmp_path / "junit.xml"
    adapter = FIXTURES / "identity_kinds_limited.py"
    done = _pytest(tmp_path, f"--mmspec-adapter={adapter}", "-k", "PFX-7 or PFX-8",
                   f"--junitxml={junit}")
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes = _outcomes(junit)
    outcome, props = outcomes["test_clause[PFX-7:pfx_every_identity_kind_keys]"]
    assert outcome == "passed" and props["mmspec_verdict"] == "pass"
    assert props["mmspec_scope"] == (  # the item names its clause and property itself
        "drew lora, cache_salt only: the block hasher's identity_kinds() leaves out "
        "prompt_embeds, which its engine's prefix cache does not serve"
    ), props
    assert "mmspec_scope" not in outcomes["test_clause[PFX-8:pfx_no_identity_kind_confusion]"][1]

"""The pytest plugin: SPEC.md's clauses inside an engine's own test run.

``pytest --mmspec-adapter=REF`` turns the test function :func:`test_clause`, imported into
any test module, into one pytest item per (clause, property) row of the report — named
``test_clause[ECM-5:EncoderCacheMachine]`` — so ``-k ECM``, ``--junitxml`` and
``--hypothesis-seed`` (the ``verify --seed`` of the command line) work as for any test.
An item passes when its row is ``pass``, is skipped when the row is ``not provided`` (a
component or capability the adapter lacks: never a pass), and fails otherwise with the
explanation the command line prints (the clause, the narrated minimal counterexample,
the replay command); each item records its verdict, example count and profile as JUnit
properties. A property that checks several clauses (a state machine) runs once per
session; each of its clauses' items reads that one run.

The items run under mmspec's own settings (``harness/profiles.py``), chosen with
``--mmspec-profile`` (``ci`` by default), whatever Hypothesis profile the caller
registers or loads (``--hypothesis-profile``, a conftest's ``settings.load_profile``):
those apply to the team's own tests only, and mmspec registers and loads none, so the
verdicts and example counts are those of ``verify --profile`` in any test run. An adapter
that cannot be loaded is one usage error (exit status 4) with the loader's message, before
any item runs.

The whole example for an engine's repository (docs/architecture.md, "The pytest
plugin"), with mmspec installed (its ``pytest11`` entry point, ``mmspec/pytest_plugin.py``,
loads this module's hooks):

    # test_mmspec.py
    from mmspec.harness.pytest_plugin import test_clause  # noqa: F401

    # then: pytest --mmspec-adapter=my_engine/mmspec_adapter.py [-k ECM]

From a checkout, load it by name: ``pytest -p harness.pytest_plugin --mmspec-adapter=...``.
A test module may also name its adapter (``MMSPEC_ADAPTER = "..."``); the option wins.
Without either, the items are skipped, saying why: the plugin is inert in a test run
that does not ask for it.
"""

from __future__ import annotations

import contextlib
import hashlib
import pickle
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

try:  # POSIX: workers share a run through a lock (_shared); elsewhere each runs its own
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

import pytest

from harness.catalog import registered_properties
from harness.loader import AdapterLoadError, load_adapter
from harness.profiles import DEFAULT_PROFILE, PROFILES, ProfileUnavailableError, profile_settings
from harness.report import render
from harness.runner import ACCEPTED, Report, Verdict, plan, verify
from spec.clauses import load_clauses

#: What a shared run gives (a verify Report here; a grade in the project's tests).
_R = TypeVar("_R")

_ADAPTER_OPTION = "--mmspec-adapter"
_PROFILE_OPTION = "--mmspec-profile"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mmspec", "mmspec: SPEC.md's clauses against an adapter")
    group.addoption(
        _ADAPTER_OPTION,
        action="store",
        metavar="REF",
        help="the adapter to check (module name, .py file or package directory exposing "
        "ADAPTER): one test item per (clause, property)",
    )
    group.addoption(
        _PROFILE_OPTION,
        action="store",
        default=DEFAULT_PROFILE,
        choices=PROFILES,
        help=f"mmspec's settings profile (default: {DEFAULT_PROFILE}); the items ignore "
        "--hypothesis-profile, which is for the run's other tests",
    )


def pytest_configure(config: pytest.Config) -> None:
    """A profile this interpreter cannot run (``crosshair`` without its backend) is one
    usage error, not the same failure on every item."""
    try:
        profile_settings(_profile(config))
    except ProfileUnavailableError as e:
        raise pytest.UsageError(str(e)) from None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A malformed adapter is one usage error, not the same failure on every item (the
    option's adapter, and any a collected module names)."""
    refs = {_adapter(config, getattr(item, "module", None)) for item in items
            if "mmspec_row" in getattr(item, "fixturenames", ())}
    refs.add(config.getoption(_ADAPTER_OPTION, None))
    for ref in sorted(r for r in refs if r):
        try:
            load_adapter(ref)
        except AdapterLoadError as e:
            _junit_error(config, str(e))
            raise pytest.UsageError(str(e)) from None


def _junit_error(config: pytest.Config, message: str) -> None:
    """With ``--junitxml``, the usage error as an error test case: a CI that reads the
    JUnit file reports it instead of nothing. Given to pytest's JUnit writer alone (no
    public API reaches it), so that the terminal shows the message once."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is not None:
        xml.pytest_collectreport(
            pytest.CollectReport("mmspec::adapter", "failed", message, [])
        )


def _rows() -> list[tuple[str, str]]:
    return [(c, n) for c, n in plan(load_clauses(), registered_properties()) if n is not None]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mmspec_row" in metafunc.fixturenames:
        rows = _rows()
        metafunc.parametrize("mmspec_row", rows, ids=[f"{c}:{n}" for c, n in rows])


def _adapter(config: pytest.Config, module: object) -> str | None:
    option = config.getoption(_ADAPTER_OPTION, None)
    if option:
        return str(option)
    named = getattr(module, "MMSPEC_ADAPTER", None)
    return str(named) if named else None


def _profile(config: pytest.Config) -> str:
    # Never --hypothesis-profile: that is the caller's, for the caller's own tests.
    return str(config.getoption(_PROFILE_OPTION, DEFAULT_PROFILE))


def _seed(config: pytest.Config) -> int | None:
    seed = config.getoption("--hypothesis-seed", None)
    if seed is None:
        return None
    try:
        return int(seed)
    except ValueError as e:
        raise pytest.UsageError(f"--hypothesis-seed {seed}: mmspec takes an integer") from e


@pytest.fixture(scope="session")
def mmspec_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str, str], Report]:
    """``(adapter, property) -> Report`` of that one property, run once per session —
    and under pytest-xdist once for all its workers (:func:`_shared`), which share the
    runs out between them (:func:`_run_ahead`)."""
    profile, seed = _profile(request.config), _seed(request.config)
    cache: dict[tuple[str, str], Report] = {}
    # xdist's workers share the parent of their own base temporary folders (pytest-xdist's
    # documented way for session fixtures to run once); without xdist, nothing to share.
    shared = (
        tmp_path_factory.getbasetemp().parent / "mmspec-runs"
        if hasattr(request.config, "workerinput") and fcntl is not None
        else None
    )

    def once(adapter: str, name: str) -> Callable[[], Report]:
        return lambda: verify(adapter, profile, [name], seed=seed, heartbeat=_heartbeat)

    def key(adapter: str, name: str) -> str:
        return repr((adapter, name, profile, seed))

    ran_ahead = False

    def run(adapter: str, name: str) -> Report:
        nonlocal ran_ahead
        if shared is not None and not ran_ahead:
            ran_ahead = True
            needed = _needed(request.session.items, request.config)
            made = _run_ahead(shared, [(key(*n), once(*n)) for n in needed])
            cache.update((needed[index], report) for index, report in made.items())
        if (adapter, name) not in cache:
            cache[adapter, name] = (
                once(adapter, name)()
                if shared is None
                else _shared(shared, key(adapter, name), once(adapter, name))
            )
        return cache[adapter, name]

    return run


def _needed(items: list[pytest.Item], config: pytest.Config) -> list[tuple[str, str]]:
    """The ``(adapter, property)`` runs the session's items of :func:`test_clause` read,
    in their order. Every xdist worker collects (and deselects) the same items."""
    needed: dict[tuple[str, str], None] = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        row = callspec.params.get("mmspec_row") if callspec is not None else None
        adapter = _adapter(config, getattr(item, "module", None))
        if isinstance(row, tuple) and adapter is not None:
            needed[adapter, str(row[1])] = None
    return list(needed)


def _run_ahead(folder: Path, runs: list[tuple[str, Callable[[], Report]]]) -> dict[int, Report]:
    """Under xdist, the first item of the plugin's on each worker runs every property
    that no worker has run or is running, in order, so that the workers share the runs
    out between them instead of one waiting for the other at each machine: a property
    whose lock another worker holds, or whose run is saved, is skipped. Returns the runs
    it made, by index. A run that raises is skipped too: the item that needs it runs it
    again and reports the error where it belongs."""
    made = {}
    for index, (key, run) in enumerate(runs):
        with _locked(folder, key, wait=False) as saved:
            if saved is None or saved.exists():
                continue
            try:
                made[index] = _saved(saved, run)
            except Exception:  # noqa: BLE001 - reported by the item that needs the run
                continue
    return made


def _shared(folder: Path, key: str, run: Callable[[], _R]) -> _R:
    """``run()``'s report, computed by the first worker that asks for ``key`` while any
    other waits on its lock, then read by every later one. xdist's ``load`` sends one
    machine's clauses round robin to every worker: each would otherwise run the whole
    machine again. A run that raises saves nothing (the next worker runs it and raises
    the same). (The project's own tests share their slowest grades the same way.)"""
    with _locked(folder, key, wait=True) as saved:
        assert saved is not None
        if saved.exists():
            report: _R = pickle.loads(saved.read_bytes())
            return report
        return _saved(saved, run)


@contextlib.contextmanager
def _locked(folder: Path, key: str, wait: bool) -> Iterator[Path | None]:
    """Holding ``key``'s lock, the path of its saved run (which may not exist yet); None,
    when not ``wait``ing, if another worker holds it. The folder is this pytest run's own
    (under the base temporary folder pytest creates, mode 0o700), written only by its
    workers."""
    assert fcntl is not None
    folder.mkdir(exist_ok=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    with (folder / f"{digest}.lock").open("w") as lock:  # the lock goes with the file
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        yield folder / f"{digest}.pickle"


def _saved(path: Path, run: Callable[[], _R]) -> _R:
    """``run()``, saved to ``path`` whole or not at all."""
    report = run()
    partial = path.with_suffix(".partial")
    partial.write_bytes(pickle.dumps(report))
    partial.replace(path)
    return report


def _heartbeat(line: str) -> None:
    """A long property's progress, past pytest's capture of the test's own output."""
    print(f"[mmspec] {line}", file=sys.__stderr__, flush=True)


def test_clause(
    mmspec_row: tuple[str, str],
    mmspec_runs: Callable[[str, str], Report],
    request: pytest.FixtureRequest,
) -> None:
    """One clause, as one property judges it, on the adapter under test."""
    clause, name = mmspec_row
    adapter = _adapter(request.config, request.module)
    if adapter is None:
        pytest.skip(f"no adapter: run pytest with {_ADAPTER_OPTION}=REF")
    report = mmspec_runs(adapter, name)
    row = next(r for r in report.rows if r.clause == clause and r.property == name)
    request.node.user_properties.extend(
        [("mmspec_verdict", row.verdict.value), ("mmspec_examples", row.examples),
         ("mmspec_profile", report.profile)]
    )
    scope = report.results[name].scope
    if scope:  # a pass on less than the whole clause, as the adapter declared
        request.node.user_properties.append(("mmspec_scope", scope))
    if row.verdict is Verdict.NOT_PROVIDED:
        why = report.results[name].why_not_provided().get(clause, row.implementations)
        pytest.skip(f"{clause}: not provided by {report.adapter_name} ({why})")
    if row.verdict not in ACCEPTED:
        pytest.fail(f"{clause} {row.verdict.value}\n\n{render(report)}", pytrace=False)


__all__: list[Any] = ["test_clause", "mmspec_runs"]

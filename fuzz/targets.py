"""The registered properties as fuzz targets, and the one callable atheris drives.

Every property is a ``@given`` test with Hypothesis' ``fuzz_one_input`` (a state
machine's is the test ``run_state_machine_as_test`` runs, from
``hypothesis.stateful.get_state_machine_test``; see
:attr:`properties.framework.Runnable.fuzz_target`). It reads the choices of one test
case (one program, for a machine) from a byte string, runs it once, and when the test
raises saves the pruned choices to the settings' database, under the key a normal run of
the same test reads (its digest + ``.secondary``) — so ``verify --profile dev`` replays
what the fuzzer found. The key is the same for every adapter (the tests' source is), so
the database itself is the adapter's own: its directory, or its key prefix in the shared
Redis database (:func:`fuzz_database`).

What ``fuzz_one_input`` does not do: health checks, shrinking, the explain phase, and a
machine's transition counts (VACUOUS needs a full run): the replay does those.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from harness.loader import LoadedAdapter
from harness.profiles import EXAMPLES_ROOT, profile_settings, shared_database
from properties.framework import ClauseViolation, Parts, PropertySpec

#: The profile fuzz targets take their settings from (the database is replaced).
FUZZ_PROFILE = "dev"


class FuzzSelectionError(ValueError):
    """The selection leaves nothing to fuzz, or names no property."""


@dataclass(frozen=True)
class FuzzTarget:
    """One property, built against one adapter, as a fuzz target."""

    name: str
    clauses: tuple[str, ...]
    fuzz_one_input: Callable[[bytes], bytes | None]


def fuzz_database(adapter_id: str, redis_url: str | None) -> ExampleDatabase:
    """Where a fuzz worker saves failures: the adapter's key space in the shared Redis
    database when ``redis_url`` is given, otherwise the adapter's own directory — the
    writable half of what :func:`harness.profiles.example_database` reads."""
    if redis_url:
        return shared_database(redis_url, adapter_id)
    return DirectoryBasedExampleDatabase(EXAMPLES_ROOT / adapter_id)


def describe_database(adapter_id: str, redis_url: str | None) -> str:
    """Where :func:`fuzz_database` saves, in words."""
    if redis_url:
        return f"the shared database {redis_url}, adapter {adapter_id}"
    return f"the directory {EXAMPLES_ROOT / adapter_id}"


def build_targets(
    registry: Mapping[str, PropertySpec],
    loaded: LoadedAdapter,
    parts: Parts,
    database: ExampleDatabase,
    only: Sequence[str] | None = None,
) -> tuple[list[FuzzTarget], list[str]]:
    """The fuzz targets for ``only`` (property names or clause ids; default: every
    property), and one line per selected property left out, saying why."""
    names = select_properties(registry, only)
    profile = settings(profile_settings(FUZZ_PROFILE), database=database)
    targets: list[FuzzTarget] = []
    left_out: list[str] = []
    for name in names:
        spec = registry[name]
        absent = missing_subject(spec, loaded)
        if absent:
            left_out.append(f"{name}: {loaded.name} does not provide {', '.join(absent)}")
            continue
        runnable = spec.build(parts)
        if runnable.fuzz_target is None:
            left_out.append(f"{name}: it has no fuzz target")
            continue
        targets.append(FuzzTarget(name, spec.clauses, runnable.fuzz_target(profile)))
    if not targets:
        raise FuzzSelectionError(
            "nothing to fuzz: " + ("; ".join(left_out) or "no property selected")
        )
    return targets, left_out


def missing_subject(spec: PropertySpec, loaded: LoadedAdapter) -> list[str]:
    """The components under test the adapter lacks, when that makes the property "not
    provided" (as :mod:`harness.runner` decides); empty when it runs."""
    absent: list[str] = [c for c in spec.subject if not loaded.provides(c)]
    if spec.subject_any and len(absent) < len(spec.subject):
        return []  # it provides some of them: run, with the reference for the rest
    return absent


def select_properties(
    registry: Mapping[str, PropertySpec], only: Sequence[str] | None
) -> list[str]:
    """The property names ``only`` selects (names or clause ids), in registry order."""
    if not only:
        return list(registry)
    unknown = [o for o in only if o not in registry and not _clause_known(registry, o)]
    if unknown:
        raise FuzzSelectionError(
            f"--only {', '.join(unknown)}: no such property or clause "
            "(`python -m properties list` shows them)"
        )
    wanted = set(only)
    return [n for n, s in registry.items() if n in wanted or wanted.intersection(s.clauses)]


def _clause_known(registry: Mapping[str, PropertySpec], clause: str) -> bool:
    return any(clause in s.clauses for s in registry.values())


@dataclass
class Dispatcher:
    """The callable atheris drives: picks a target (the first byte, when there are
    several, so one coverage-guided corpus spans them all), runs one test case, and
    records a failure instead of stopping — the test case is already in the database,
    and the fuzzer goes on looking for other failures and smaller ones (libFuzzer's
    stop-at-first-crash with ``stop_on_failure``).

    ``max_runs`` / ``max_seconds`` bound the run by count or time (the first reached
    ends it, via ``finish``): a count is what makes a short run repeatable.
    """

    targets: Sequence[FuzzTarget]
    finish: Callable[[Dispatcher], None]
    max_runs: int | None = None
    max_seconds: float | None = None
    stop_on_failure: bool = False
    runs: int = 0
    #: (property, clause or exception type) -> (the run that first found it, message)
    found: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    failing_runs: int = 0
    started: float = field(default_factory=time.monotonic)
    report: Callable[[str], None] = print

    def __call__(self, data: bytes) -> None:
        self.runs += 1
        if len(self.targets) == 1:
            target, rest = self.targets[0], data
        elif data:
            target, rest = self.targets[data[0] % len(self.targets)], data[1:]
        else:
            target, rest = None, b""
        if target is not None:
            try:
                target.fuzz_one_input(rest)
            except Exception as e:  # noqa: BLE001 - every failure is recorded
                self._record(target, e)
                if self.stop_on_failure:
                    raise
        if self._exhausted():
            self.finish(self)

    def _record(self, target: FuzzTarget, error: Exception) -> None:
        self.failing_runs += 1
        kind = error.clause if isinstance(error, ClauseViolation) else type(error).__name__
        if (target.name, kind) not in self.found:
            message = f"{type(error).__name__}: {error}"
            self.found[(target.name, kind)] = (self.runs, message)
            self.report(f"FOUND at run {self.runs}: {target.name}: {message}")

    def _exhausted(self) -> bool:
        if self.max_runs is not None and self.runs >= self.max_runs:
            return True
        elapsed = time.monotonic() - self.started
        return self.max_seconds is not None and elapsed >= self.max_seconds

    def summary(self) -> str:
        lines = [
            f"{self.runs} runs in {time.monotonic() - self.started:.1f} s over "
            f"{len(self.targets)} propert{'y' if len(self.targets) == 1 else 'ies'}; "
            f"{self.failing_runs} failing, {len(self.found)} distinct failure(s)"
        ]
        lines += [
            f"  {name} ({kind}): first at run {run}: {message}"
            for (name, kind), (run, message) in sorted(self.found.items())
        ]
        return "\n".join(lines)

"""Run the exhaustive search in place of Hypothesis for the machines it covers.

:meth:`Exhaustive.transform` (the runner's ``transform`` hook) turns a machine
property's :class:`Runnable` (built as usual from the adapter's parts) into one whose
``run`` is the breadth-first search over the machine's scope. The runner treats it
like any property: a violation is a ``FAIL`` of its clause (its counterexample the
shortest path, as numbered steps), any other exception an ``ERROR``, and the
machine's transitions are counted over every explored operation (``VACUOUS`` if the
scope misses one). ``examples`` holds the number of distinct states explored, which
the report's table shows as ``states`` (harness/report.py).

Three scopes: ``default`` (SPEC.md "## Exhaustive scopes"; ``make exhaustive``),
``bounded`` (a few seconds; part of ``make verify``) and ``full`` (the default's
scenarios with cache-manager sequences up to depth 8: hours on two cores).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import settings as Settings

from exhaustive.ecm import EcmScope, EcmSpace
from exhaustive.engine import DRAFTER_CONFIGS, DRAFTER_PROMPTS, EngineScope, EngineSpace
from exhaustive.options import SCOPE_NAMES
from exhaustive.search import CloneMode, SearchResult, Violation, explore
from properties.framework import ClauseViolation, PropertySpec, Runnable


@dataclass(frozen=True)
class Scopes:
    """The scope of each machine's search."""

    name: str
    ecm: EcmScope = field(default_factory=EcmScope)
    engine: EngineScope = field(default_factory=EngineScope)
    drafter: EngineScope = field(
        default_factory=lambda: EngineScope(DRAFTER_CONFIGS, DRAFTER_PROMPTS)
    )


SCOPES = {
    "default": Scopes("default"),
    # the literal scope: the default's scenarios to depth 8 (hours on two cores)
    "full": Scopes("full", EcmScope(depth=8)),
    "bounded": Scopes(
        "bounded",
        EcmScope(capacities=(2, 3), sizes=(1, 2), depth=4),
        EngineScope(depth=3),
        EngineScope(DRAFTER_CONFIGS, DRAFTER_PROMPTS, depth=3),
    ),
}
assert tuple(SCOPES) == SCOPE_NAMES  # the command line's choices (exhaustive/options.py)

#: The properties the exhaustive search can stand in for: the state machines.
COVERED = ("EncoderCacheMachine", "EngineMachine", "EngineDrafterMachine")


def describe(scopes: Scopes, name: str) -> str:
    """The scope of machine ``name``, in words."""
    if name == "EncoderCacheMachine":
        return scopes.ecm.describe()
    if name == "EngineDrafterMachine":
        return scopes.drafter.describe()
    return scopes.engine.describe()


@dataclass
class Exhaustive:
    """What the exhaustive runs of one verification saw, per property (for printing)."""

    scopes: Scopes
    clone: CloneMode = "copy"
    results: dict[str, SearchResult] = field(default_factory=dict)
    progress: Callable[[str], None] | None = None

    def transform(self, spec: PropertySpec, runnable: Runnable) -> Runnable:
        """The runner's hook: the search instead of Hypothesis for covered machines."""
        if spec.name not in COVERED or runnable.machine_class is None:
            return runnable
        machine_class = runnable.machine_class
        if spec.name == "EncoderCacheMachine":
            spaces: list[EcmSpace] | list[EngineSpace] = [
                EcmSpace(machine_class, s) for s in self.scopes.ecm.scenarios()
            ]
            depth = self.scopes.ecm.depth
        else:
            engine = self.scopes.drafter if spec.name == "EngineDrafterMachine" else (
                self.scopes.engine
            )
            spaces = [EngineSpace(machine_class, c, engine) for c in engine.configs]
            depth = engine.depth

        def run(_profile: Settings) -> None:
            result = explore(spaces, depth, self.clone, self.progress)
            self.results[spec.name] = result
            # the machine's constructor counted set-ups; what was checked is states
            runnable.examples = result.states
            if result.violation is not None:
                raise _with_path(result.violation)

        runnable.run = run
        return runnable


def _with_path(violation: Violation) -> BaseException:
    """The violation's exception, its notes the scenario and the numbered shortest path
    (the form the runner prints as a counterexample)."""
    error = violation.error
    error.add_note(f"scenario: {violation.scenario}")
    for line in violation.setup:
        error.add_note(f"  {line}")
    error.add_note(f"shortest path ({_operations(len(violation.path))}):")
    for number, step in enumerate(violation.path, 1):
        error.add_note(f"{number}. {step.label}")
        for line in step.notes:
            error.add_note(f"     {line}")
    return error


def _operations(count: int) -> str:
    return f"{count} operation{'' if count == 1 else 's'}"


def summary(name: str, scopes: Scopes, result: SearchResult) -> list[str]:
    """The lines ``verify --exhaustive`` prints for one machine: scope, counts, time."""
    lines = [
        f"{name}: {scopes.name} scope: {describe(scopes, name)}",
        f"  {result.spaces} scenarios, {result.states} distinct states, "
        f"{result.transitions} transitions, depth {result.depth_reached}, "
        f"{result.seconds:.1f} s"
        + (f" ({result.replayed_spaces} scenarios replayed)" if result.replayed_spaces else ""),
    ]
    violation = result.violation
    if violation is not None:
        error = violation.error
        clause = error.clause if isinstance(error, ClauseViolation) else type(error).__name__
        lines.append(
            f"  violation of {clause} after {_operations(len(violation.path))} "
            f"(scenario: {violation.scenario})"
        )
    return lines


def print_summaries(exhaustive: Exhaustive) -> None:
    for name, result in exhaustive.results.items():
        for line in summary(name, exhaustive.scopes, result):
            print(line, file=sys.stdout)

"""Time-to-catch: how fast each zoo entry's own property catches it (``make time-to-catch``).

For every runnable entry of ``adapters/zoo/``, its ``KILLED_BY`` property runs against it
twice in the ``ci`` profile (derandomized, so both runs generate the same test cases):

1. without the shrink phase, which stops at the first failure: the **examples to the
   first failure** (test cases, or machine runs, including the failing one) and the
   **seconds to the first failure** (building the property and running it);
2. as ``make verify`` runs it: the **seconds including shrinking** (and Hypothesis'
   search for further distinct bugs after the first) and the shrunk counterexample's
   **length in steps** for a state machine: the rule calls of the falsifying program,
   ``@initialize`` rules included, invariant checks and ``teardown`` not.

Both runs must end in a failed assertion of the entry's ``BREAKS`` clause, or the entry
is reported as not caught (exit status 1). Then the medians and maxima, and the entries
that miss the targets (first failure < 5 s each, median < 0.5 s; shrunk machine
counterexamples of at most 6 steps). Entries whose optional dependency (torch) is absent
are listed and skipped.

    python benchmarks/time_to_catch.py [--entry NAME ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hypothesis import Phase, settings  # noqa: E402
from hypothesis.stateful import INVARIANT_MARKER, RuleBasedStateMachine  # noqa: E402

from harness.catalog import registered_properties  # noqa: E402
from harness.loader import REFERENCE_REF, build_parts, load_adapter  # noqa: E402
from harness.profiles import settings_for  # noqa: E402
from harness.runner import Verdict, run_property  # noqa: E402
from harness.zoo import ZooEntry, discover_named  # noqa: E402
from properties.framework import ClauseViolation, Runnable  # noqa: E402

PROFILE = "ci"
#: The issue's targets.
MEDIAN_FIRST_FAILURE_S = 0.5
MAX_FIRST_FAILURE_S = 5.0
MAX_MACHINE_STEPS = 6

#: A rule call in Hypothesis' printout of a falsifying program, with or without a
#: bundle assignment (``a_0, a_1 = state.add(...)``).
_CALL = re.compile(r"^(?:[\w, ]+ = )?state\.(\w+)\(")


@dataclass(frozen=True)
class Catch:
    entry: str
    property: str
    clause: str
    examples_to_first_failure: int
    seconds_to_first_failure: float
    seconds_with_shrinking: float
    #: Rule calls of the shrunk program (None: a stateless property, no steps).
    steps: int | None
    caught: bool
    detail: str = ""


def first_failure(entry: ZooEntry) -> tuple[int, float, bool, str]:
    """Run KILLED_BY without shrinking: (examples, seconds, caught on BREAKS, detail)."""
    loaded = load_adapter(entry.module)
    parts = build_parts(loaded.adapter, load_adapter(REFERENCE_REF).adapter)
    spec = registered_properties()[entry.killed_by]
    base = settings_for(PROFILE, loaded.identity)
    no_shrink = settings(base, phases=tuple(p for p in base.phases if p is not Phase.shrink))
    started = time.perf_counter()
    runnable = spec.build(parts)
    try:
        runnable.run(no_shrink)
    except BaseException as error:  # noqa: BLE001 - classified below
        seconds = time.perf_counter() - started
        clauses = {leaf.clause for leaf in _leaves(error) if isinstance(leaf, ClauseViolation)}
        if entry.breaks in clauses:
            return runnable.examples, seconds, True, ""
        return runnable.examples, seconds, False, f"first failure: {type(error).__name__}"
    return runnable.examples, time.perf_counter() - started, False, "no failure"


def with_shrinking(entry: ZooEntry) -> tuple[float, int | None, bool, str]:
    """Run KILLED_BY as ``make verify`` does: (seconds, steps, caught on BREAKS, detail)."""
    loaded = load_adapter(entry.module)
    parts = build_parts(loaded.adapter, load_adapter(REFERENCE_REF).adapter)
    spec = registered_properties()[entry.killed_by]
    result = run_property(spec, parts, PROFILE, loaded.identity)
    failures = [f for f in result.failures if f.verdict is Verdict.FAIL]
    mine = [f for f in failures if f.clause == entry.breaks]
    if not mine:
        return result.seconds, None, False, f"verdict {result.verdict.value}"
    invariants = _invariant_names(spec.build(parts))
    if invariants is None:
        return result.seconds, None, True, ""
    calls = [m.group(1) for line in mine[0].counterexample if (m := _CALL.match(line))]
    steps = sum(1 for name in calls if name not in invariants and name != "teardown")
    return result.seconds, steps, True, ""


def _invariant_names(runnable: Runnable) -> set[str] | None:
    """The invariants of the runnable's state machine; None for a stateless property.
    ``properties.framework.machine`` closes its ``run`` over the machine class."""
    if runnable.machine_name is None:
        return None
    for cell in runnable.run.__closure__ or ():
        value = cell.cell_contents
        if isinstance(value, type) and issubclass(value, RuleBasedStateMachine):
            return {
                name
                for name in dir(value)
                if getattr(getattr(value, name, None), INVARIANT_MARKER, None) is not None
            }
    return set()


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for member in error.exceptions for leaf in _leaves(member)]
    return [error]


def measure(entry: ZooEntry) -> Catch:
    examples, first_s, first_ok, first_detail = first_failure(entry)
    total_s, steps, total_ok, total_detail = with_shrinking(entry)
    return Catch(
        entry=entry.short_name,
        property=entry.killed_by,
        clause=entry.breaks,
        examples_to_first_failure=examples,
        seconds_to_first_failure=first_s,
        seconds_with_shrinking=total_s,
        steps=steps,
        caught=first_ok and total_ok,
        detail="; ".join(d for d in (first_detail, total_detail) if d),
    )


def render(catches: Sequence[Catch], skipped: Sequence[ZooEntry]) -> tuple[str, list[str]]:
    """The table, the medians and maxima, and the misses."""
    width = max((len(c.entry) for c in catches), default=5)
    pwidth = max((len(c.property) for c in catches), default=8)
    header = (
        f"{'entry'.ljust(width)}  {'property'.ljust(pwidth)}  examples  first s  "
        "total s  steps"
    )
    lines = [f"time to catch ({PROFILE} profile), each entry by its KILLED_BY", "", header]
    for c in catches:
        steps = "-" if c.steps is None else str(c.steps)
        flag = "" if c.caught else f"  NOT CAUGHT ({c.detail})"
        lines.append(
            f"{c.entry.ljust(width)}  {c.property.ljust(pwidth)}  "
            f"{c.examples_to_first_failure:8d}  {c.seconds_to_first_failure:7.2f}  "
            f"{c.seconds_with_shrinking:7.2f}  {steps:>5}{flag}"
        )
    machine_steps = [c.steps for c in catches if c.steps is not None]
    columns: list[tuple[str, list[float]]] = [
        ("examples to first failure", [c.examples_to_first_failure for c in catches]),
        ("seconds to first failure", [c.seconds_to_first_failure for c in catches]),
        ("seconds including shrinking", [c.seconds_with_shrinking for c in catches]),
        ("state-machine steps after shrinking", [float(s) for s in machine_steps]),
    ]
    lines.append("")
    for label, values in columns:
        if values:
            lines.append(
                f"{label}: median {statistics.median(values):.2f}, max {max(values):.2f}"
            )
    misses: list[str] = []
    firsts = [c.seconds_to_first_failure for c in catches]
    if firsts and statistics.median(firsts) >= MEDIAN_FIRST_FAILURE_S:
        misses.append(f"median seconds to first failure >= {MEDIAN_FIRST_FAILURE_S}")
    for c in catches:
        if not c.caught:
            misses.append(f"{c.entry}: not caught by {c.property} on {c.clause} ({c.detail})")
        if c.seconds_to_first_failure >= MAX_FIRST_FAILURE_S:
            misses.append(
                f"{c.entry}: first failure after {c.seconds_to_first_failure:.2f} s "
                f"({c.examples_to_first_failure} examples)"
            )
        if c.steps is not None and c.steps > MAX_MACHINE_STEPS:
            misses.append(f"{c.entry}: shrunk to {c.steps} steps")
    for entry in skipped:
        lines.append(f"skipped {entry.short_name}: needs {entry.needs}, not installed")
    lines.append("")
    if misses:
        lines += ["targets missed:"] + [f"  {m}" for m in misses]
    else:
        lines.append(
            f"all targets met: median first failure < {MEDIAN_FIRST_FAILURE_S} s, every "
            f"first failure < {MAX_FIRST_FAILURE_S} s, every machine counterexample "
            f"<= {MAX_MACHINE_STEPS} steps"
        )
    return "\n".join(lines) + "\n", misses


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/time_to_catch.py")
    parser.add_argument("--entry", nargs="+", metavar="NAME", help="only these entries")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the rows here")
    args = parser.parse_args(argv)
    entries = discover_named(args.entry, parser.error)
    runnable = [e for e in entries if e.needs is None]
    catches = []
    for entry in runnable:
        catches.append(measure(entry))
        print(f"measured {entry.short_name}", file=sys.stderr, flush=True)
    text, _misses = render(catches, [e for e in entries if e.needs is not None])
    sys.stdout.write(text)
    if args.json:
        args.json.write_text(json.dumps([asdict(c) for c in catches], indent=2) + "\n")
    # Missing a time target is a finding to read, not a broken build; an entry its own
    # property does not catch is a broken zoo.
    return 0 if all(c.caught for c in catches) else 1


if __name__ == "__main__":
    raise SystemExit(main())

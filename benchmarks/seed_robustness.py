"""Seed robustness: does each zoo entry's own property catch it under *any* seed, not
only the profile's derandomized one? (issue 31: power kept when budgets change)

    PYTHONPATH=. .venv/bin/python benchmarks/seed_robustness.py [--seeds 20] [--profile ci]
        [--entry NAME ...] [--jobs 2] [--json FILE]

For every runnable entry of ``adapters/zoo/`` and seeds 1..N, its ``KILLED_BY`` property
runs against it in the profile (default ``ci``), seeded as ``verify --seed S`` seeds it
(:func:`harness.runner.property_seed`), without the shrink phase: a kill only has to
happen. A seed kills the entry when the run fails on a clause assertion (as the kill
matrix's ``K``); the report also counts the kills on the entry's own ``BREAKS`` clause
first (elsewhere ``verify`` sets the first clause aside and runs again, so it finds
``BREAKS`` then). It gives each entry's kills out of N and the most examples any killing
seed needed (test cases, or machine programs, up to and including the failing one; the
``ci`` budget is 100, 200 for the machines with a floor of 200 programs), then the entries
under the bar: at least 19 of 20 (95 %) of the seeds must kill.

The examples-to-kill say how much room a budget has, roughly: Hypothesis' generation
depends a little on ``max_examples`` itself (the machines' 38 entries in ``grading`` at
400 programs and at 200 killed under the same seeds, on the same clause first, after a
few examples more or fewer), so it is a figure to read before changing a profile, never
a replacement for running this again after.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
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

from harness.catalog import registered_properties  # noqa: E402
from harness.loader import REFERENCE_REF, build_parts, load_adapter  # noqa: E402
from harness.profiles import settings_for  # noqa: E402
from harness.runner import property_seed  # noqa: E402
from harness.zoo import ZooEntry, discover_named  # noqa: E402
from properties.framework import ClauseViolation  # noqa: E402

#: The bar of issue 31: at least this share of the seeds kills every entry.
BAR = 0.95


@dataclass(frozen=True)
class Run:
    entry: str
    seed: int
    killed: bool
    #: The first failure was on the entry's BREAKS clause.
    on_breaks: bool
    #: Examples up to the first failure, or the whole run's when it survived.
    examples: int
    seconds: float
    detail: str = ""


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for member in error.exceptions for leaf in _leaves(member)]
    return [error]


def run_one(task: tuple[ZooEntry, int, str]) -> Run:
    """The entry's KILLED_BY under one seed, no shrinking."""
    entry, seed, profile = task
    loaded = load_adapter(entry.module)
    parts = build_parts(loaded.adapter, load_adapter(REFERENCE_REF).adapter)
    spec = registered_properties()[entry.killed_by]
    base = settings_for(profile, loaded.identity)
    no_shrink = settings(base, phases=tuple(p for p in base.phases if p is not Phase.shrink))
    runnable = spec.build(parts)
    runnable.seed = property_seed(seed, spec.name)
    started = time.perf_counter()
    try:
        runnable.run(no_shrink)
    except BaseException as error:  # noqa: BLE001 - classified here
        clauses = {leaf.clause for leaf in _leaves(error) if isinstance(leaf, ClauseViolation)}
        killed = bool(clauses)
        detail = "" if killed else f"first failure: {type(error).__name__}"
        return Run(entry.short_name, seed, killed, entry.breaks in clauses, runnable.examples,
                   time.perf_counter() - started, detail)
    return Run(entry.short_name, seed, False, False, runnable.examples,
               time.perf_counter() - started, "survived")


def measure(entries: Sequence[ZooEntry], seeds: int, profile: str, jobs: int) -> list[Run]:
    tasks = [(entry, seed, profile) for entry in entries for seed in range(1, seeds + 1)]
    runs: list[Run] = []
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for done, run in enumerate(pool.imap(run_one, tasks), 1):
            runs.append(run)
            if done % seeds == 0:
                mine = runs[-seeds:]
                kills = sum(r.killed for r in mine)
                print(f"[{done // seeds}/{len(entries)}] {run.entry}: {kills}/{seeds}",
                      file=sys.stderr, flush=True)
    return runs


def render(runs: Sequence[Run], seeds: int) -> tuple[str, bool]:
    by_entry: dict[str, list[Run]] = {}
    for run in runs:
        by_entry.setdefault(run.entry, []).append(run)
    width = max(len(name) for name in by_entry)
    lines = [f"{'entry'.ljust(width)}  kills  on BREAKS first  most examples to a kill"]
    under: list[str] = []
    for name, mine in by_entry.items():
        kills = [r for r in mine if r.killed]
        most = max((r.examples for r in kills), default=0)
        first = sum(r.on_breaks for r in mine)
        lines.append(f"{name.ljust(width)}  {len(kills):>2}/{seeds}  {first:>8}/{seeds}  {most}")
        if len(kills) < BAR * seeds:
            misses = "; ".join(sorted({r.detail for r in mine if not r.killed}))
            under.append(f"{name}: {len(kills)}/{seeds} ({misses})")
    robust = len(by_entry) - len(under)
    lines += ["", f"seed robustness: {robust}/{len(by_entry)} entries killed by at least "
              f"{BAR:.0%} of {seeds} seeds"]
    lines += [f"  under the bar: {u}" for u in under]
    lines.append(f"examples to a kill over every killing run: median "
                 f"{statistics.median([r.examples for r in runs if r.killed] or [0])}, "
                 f"max {max([r.examples for r in runs if r.killed] or [0])}")
    return "\n".join(lines), not under


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--entry", nargs="+", metavar="NAME")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    everything = discover_named(args.entry, parser.error)
    entries = [e for e in everything if e.needs is None]
    started = time.perf_counter()
    runs = measure(entries, args.seeds, args.profile, args.jobs)
    text, ok = render(runs, args.seeds)
    print(text)
    for entry in everything:
        if entry.needs is not None:
            print(f"skipped {entry.short_name}: needs {entry.needs}, not installed")
    print(f"({len(runs)} runs in {time.perf_counter() - started:.0f} s, profile {args.profile})")
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

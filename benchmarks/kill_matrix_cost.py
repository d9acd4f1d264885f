"""Where the kill matrix's time goes (issue 31; docs/verdict_cost.md): every cell timed.

    PYTHONPATH=. .venv/bin/python benchmarks/kill_matrix_cost.py [--jobs 2] [--entry NAME ...]
                                                                 [--json FILE]

Runs what ``python -m harness.kill_matrix`` runs — every property that exercises a
component an entry replaces, in the ``mutation`` profile — and prints each cell's
seconds summed by its mark (K, k, E, V, ., - as in the matrix), the properties that cost
the most, the costliest entries, and the matrix's makespan on ``--jobs`` processes with
the entries in their order (as ``harness.kill_matrix`` submits them) against
longest-first. A cell's seconds are the property's own run in its worker process
(``PropertyResult.seconds``), so the figures hold whatever else the machine does only as
far as the worker gets a core of its own. ``--json``: every cell, for a later comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from harness.catalog import registered_properties
from harness.kill_matrix import PROFILE, cell_mark, exercising
from harness.runner import verify
from harness.zoo import ZooEntry, discover_named

Cell = tuple[str, str, str, float]  # entry, property, mark, seconds


def timed_row(entry: ZooEntry) -> list[Cell]:
    """The entry's row, each cell with the seconds its property ran."""
    names = exercising(entry, registered_properties())
    report = verify(entry.module, PROFILE, only=names, per_clause=False)
    cells: list[Cell] = []
    for name in names:
        result = report.results[name]
        cells.append((entry.short_name, name, cell_mark(entry, name, result.verdict),
                      result.seconds))
    return cells


def makespan(costs: Sequence[float], jobs: int) -> float:
    """The wall time of ``costs`` handed in order to whichever of ``jobs`` workers frees
    first (a process pool's ``map``)."""
    workers = [0.0] * max(1, jobs)
    for cost in costs:
        workers[workers.index(min(workers))] += cost
    return max(workers)


def _costliest(seconds: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(seconds.items(), key=lambda item: -item[1])


def summary(cells: Sequence[Cell], jobs: int) -> str:
    by_mark: dict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    by_property: dict[str, float] = defaultdict(float)
    by_entry: dict[str, float] = defaultdict(float)
    for entry, name, mark, seconds in cells:
        by_mark[mark] += seconds
        count[mark] += 1
        by_property[name] += seconds
        by_entry[entry] += seconds
    total = sum(by_mark.values())
    lines = [f"kill matrix cost: {len(by_entry)} entries, {len(cells)} cells, "
             f"{total:.1f} s in the workers"]
    for mark, seconds in _costliest(by_mark):
        lines.append(f"  cells {mark!r}: {count[mark]:4d} cells, {seconds:8.1f} s "
                     f"({100 * seconds / total:.0f} %)")
    lines.append("costliest properties:")
    for name, seconds in _costliest(by_property)[:10]:
        lines.append(f"  {seconds:8.1f} s  {name} ({100 * seconds / total:.0f} %)")
    lines.append("costliest entries:")
    for entry, seconds in _costliest(by_entry)[:10]:
        lines.append(f"  {seconds:8.1f} s  {entry}")
    in_order = list(by_entry.values())
    lines.append(
        f"makespan on {jobs} processes: {makespan(in_order, jobs):.1f} s in entry order, "
        f"{makespan(sorted(in_order, reverse=True), jobs):.1f} s longest first, "
        f"{total / max(1, jobs):.1f} s with no idle worker"
    )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/kill_matrix_cost.py")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--entry", nargs="+", metavar="NAME")
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args(argv)
    entries = [e for e in discover_named(args.entry, parser.error) if e.needs is None]
    cells: list[Cell] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(timed_row, entries):
            cells += row
            print(f"[kill-matrix-cost] {row[0][0] if row else '?'}: "
                  f"{sum(c[3] for c in row):.1f} s", file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(cells), encoding="utf-8")
    sys.stdout.write(summary(cells, args.jobs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The seed sweep: the whole suite against one adapter under many fresh seeds.

A derandomized profile meets the same test cases on every run, so a clause the reference
breaks only in states that one seed never reaches stays green in ``make verify`` and
costs every student a point under a secret seed (issue 19: SCH-6 with adjacent images and
a drafter shift). The sweep draws fresh seeds (or takes them from ``--seeds``), prints
each before running it, and runs every property under :func:`~harness.runner.
property_seed` of it — exactly what ``verify --seed S`` and ``grade --seed S`` run, so
a failure replays with the command it prints::

    python -m harness.sweep [--adapter REF] [--profile ci] [--count 50] [--seeds S ...]
                               [--only NAME ...]

Exit status: 0 when every row of every seed passes (or is ``not provided``), 1
otherwise, 2 for a malformed adapter or command line.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence

from harness.loader import REFERENCE_REF, AdapterLoadError
from harness.profiles import DEFAULT_PROFILE, PROFILES
from harness.report import replay_command, summary_line
from harness.runner import ACCEPTED, Report, UnknownSelectionError, verify

#: Fresh seeds are drawn below this bound: short enough to retype from a log.
SEED_BOUND = 10**9


def fresh_seeds(count: int) -> list[int]:
    """``count`` distinct seeds from the operating system's randomness."""
    rng = random.SystemRandom()
    seeds: list[int] = []
    while len(seeds) < count:
        seed = rng.randrange(SEED_BOUND)
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def failing_rows(report: Report) -> list[str]:
    """``CLAUSE property VERDICT`` for every row that is not a pass."""
    return [
        f"{row.clause} {row.property} {row.verdict.value}"
        for row in report.rows
        if row.verdict not in ACCEPTED
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.sweep", description=__doc__)
    parser.add_argument("--adapter", default=REFERENCE_REF, metavar="REF")
    parser.add_argument("--profile", default=DEFAULT_PROFILE, choices=PROFILES)
    parser.add_argument("--count", type=int, default=50, help="fresh seeds to draw (default 50)")
    parser.add_argument("--seeds", type=int, nargs="+", metavar="S", help="these seeds instead")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these properties or clauses")
    args = parser.parse_args(argv)
    if args.count < 1 and not args.seeds:
        parser.error("--count must be at least 1")
    seeds: list[int] = args.seeds or fresh_seeds(args.count)
    print(f"seed sweep: {args.adapter}, profile {args.profile}, {len(seeds)} seeds: "
          + " ".join(map(str, seeds)), flush=True)
    started, failed = time.perf_counter(), []
    for number, seed in enumerate(seeds, 1):
        try:
            report = verify(args.adapter, args.profile, args.only, seed=seed)
        except (AdapterLoadError, UnknownSelectionError) as e:
            print(str(e), file=sys.stderr)
            return 2
        bad = failing_rows(report)
        print(f"[{number}/{len(seeds)}] seed {seed}: {summary_line(report)}", flush=True)
        for row in bad:
            replay = replay_command(report, row.split()[1], (), f" --seed {seed}")
            print(f"    {row}; replay: {replay}")
        if bad:
            failed.append(seed)
    seconds = time.perf_counter() - started
    print(f"seed sweep: {len(seeds) - len(failed)} of {len(seeds)} seeds with every row "
          f"passing in {seconds:.0f} s" + (f"; failing seeds: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Every zoo entry is killed by its own property through the isolated path too (the
zoo meta-test, run in a child process): isolation must not hide a bug.

    PYTHONPATH=. .venv/bin/python benchmarks/isolation_zoo.py [--profile mutation]

Prints one line per entry (entries needing an absent optional dependency are skipped)
and exits 1 when any entry is not killed by a FAIL of its property.
"""

from __future__ import annotations

import argparse
import sys
import time

from harness.isolation import IsolatedSession, Limits
from harness.runner import Verdict, verify
from harness.zoo import discover


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="mutation")
    args = parser.parse_args()
    missed = []
    for entry in discover():
        if entry.needs:
            print(f"{entry.short_name:40} skipped (needs {entry.needs})")
            continue
        started = time.perf_counter()
        with IsolatedSession(entry.module, Limits()) as session:
            report = verify(entry.module, args.profile, [entry.killed_by], session=session)
        result = report.results[entry.killed_by]
        print(f"{entry.short_name:40} {result.verdict.value:8} "
              f"{time.perf_counter() - started:5.1f} s", flush=True)
        if result.verdict is not Verdict.FAIL:
            missed.append(entry.short_name)
    if missed:
        print(f"not killed isolated: {', '.join(missed)}")
        return 1
    print("every entry killed through the isolated path")
    return 0


if __name__ == "__main__":
    sys.exit(main())

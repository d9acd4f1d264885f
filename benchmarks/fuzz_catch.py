"""Fuzz-to-catch: does coverage-guided fuzzing find each zoo entry's bug (``make fuzz-catch``)?

For every runnable entry of ``adapters/zoo/``, ``python -m fuzz.run`` fuzzes its
``KILLED_BY`` property against it — a fresh process, at most ``--runs`` test cases under
libFuzzer seed ``--seed``, stopping at the first failure, its examples in a temporary
directory — and reports the run at which it first failed and the wall-clock seconds of
the whole process (start-up included). An entry is caught when the failure names its
``BREAKS`` clause. Entries whose optional dependency (torch) is absent are skipped.

    python benchmarks/fuzz_catch.py [--runs N] [--seed S] [--entry NAME ...]

Exit status 1 when an entry is not caught within the budget: fuzzing is a search, not a
proof, but an entry its own property misses under fuzzing is worth knowing about.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.zoo import discover  # noqa: E402

_FOUND = re.compile(r"^FOUND at run (\d+): (\S+): (?:ClauseViolation\[([^\]]+)\]|(\w+))", re.M)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--entry", nargs="+", metavar="NAME", help="only these entries")
    args = parser.parse_args()
    entries = [e for e in discover() if not args.entry or e.short_name in args.entry]
    missed = 0
    print(f"{'entry':40} {'property':36} {'clause':8} {'run':>6} {'s':>6}")
    for entry in entries:
        if entry.needs:
            print(f"{entry.short_name:40} {entry.killed_by:36} skipped: needs {entry.needs}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            env = {k: v for k, v in os.environ.items() if not k.startswith("MMSPEC_")}
            env.update(PYTHONPATH=str(ROOT), PYTHONHASHSEED="0", MMSPEC_EXAMPLES_DIR=tmp)
            started = time.perf_counter()
            result = subprocess.run(
                [sys.executable, "-m", "fuzz.run", "--adapter", entry.module,
                 "--only", entry.killed_by, "--runs", str(args.runs), "--seed",
                 str(args.seed), "--stop-on-failure", "--", f"-artifact_prefix={tmp}/"],
                cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            seconds = time.perf_counter() - started
        found = _FOUND.search(result.stdout)
        clause = (found.group(3) or found.group(4)) if found else None
        if found and clause == entry.breaks:
            run = found.group(1)
        else:
            missed += 1
            run = "MISSED" if not found else f"other: {clause}"
        print(f"{entry.short_name:40} {entry.killed_by:36} {entry.breaks:8} {run:>6} "
              f"{seconds:6.1f}", flush=True)
    print(f"{missed} of {sum(1 for e in entries if not e.needs)} runnable entries missed "
          f"within {args.runs} runs (seed {args.seed})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

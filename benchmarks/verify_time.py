"""How long ``make verify`` takes now, next to a baseline commit, on this machine.

    PYTHONPATH=. .venv/bin/python benchmarks/verify_time.py [--base REV] [--rounds N]

Checks ``REV`` (default 7a6ee04, the tree when issue 14 set the budget: within 10 % of
its time) out into a temporary git worktree and times, in interleaved rounds so that the
machine's load falls on both alike, the two commands each tree's ``make verify`` runs
(the properties in the ``ci`` profile — with ``--jobs 2`` where the tree has it — then
the bounded exhaustive search), with this checkout's ``.venv``. Prints every round, the
medians and their ratio. Not part of ``make test``: a figure, not a verdict.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _make_verify(tree: Path) -> list[list[str]]:
    """The commands ``make verify`` runs in ``tree`` (read from its Makefile)."""
    makefile = (tree / "Makefile").read_text(encoding="utf-8")
    jobs = ["--jobs", "2"] if "--jobs $(JOBS)" in makefile else []
    python = str(ROOT / ".venv" / "bin" / "python")
    return [
        [python, "-m", "properties", "verify", "--profile", "ci", *jobs],
        [python, "-m", "properties", "verify", "--exhaustive", "bounded"],
    ]


def _seconds(tree: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.perf_counter()
    for command in _make_verify(tree):
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, check=False)
        if done.returncode != 0:
            sys.exit(f"{' '.join(command)} failed in {tree}:\n{done.stdout.decode()[-2000:]}")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--base", default="7a6ee04")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch) / "base"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(base), args.base],
                       cwd=ROOT, check=True)
        try:
            then: list[float] = []
            now: list[float] = []
            for round_ in range(1, args.rounds + 1):
                then.append(_seconds(base))
                now.append(_seconds(ROOT))
                print(f"round {round_}: {args.base} {then[-1]:.1f} s, HEAD {now[-1]:.1f} s",
                      flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT,
                           check=False)
    a, b = statistics.median(then), statistics.median(now)
    print(f"median: {args.base} {a:.1f} s, HEAD {b:.1f} s; HEAD / {args.base} = {b / a:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

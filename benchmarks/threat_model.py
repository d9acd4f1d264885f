"""Measure the threat model of docs/grading.md: every hostile adapter of
tests/fixtures/hostile/, graded under each setup, held or not.

    PYTHONPATH=. python benchmarks/threat_model.py [--only NAME ...] [--setups SETUP ...]

Setups: ``in-process`` (``grade --in-process``), ``child`` (the default isolation),
``sandbox`` (the child as the sandbox user ``mmspec-grader``: needs root and that user,
as gradescope/setup.sh makes). Each run is a ``python -m properties grade`` of its own
on the battery's rubric, with the battery's small limits, under a 90 s wall clock and a
4 GiB address-space limit (an in-process memory hog must not take the machine), in a
scratch /autograder-like tree holding a root-only grading.env and rubric and a
results.json (sandbox_escape attacks those). A run *holds* when the grader returns a
report that parses, with the points the adapter earns (0 on what it attacks, 5 for what
it leaves alone; a load-time crash: exit 2, explained), and nothing the adapter started
did what it tried (a marker file written, an attempt that succeeded).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "tests" / "fixtures" / "hostile"
SETUPS = ("in-process", "child", "sandbox")
LIMITS = ["--call-timeout", "2", "--property-timeout", "20", "--memory-limit", "768MiB",
          "--cpu-limit", "60"]
#: What each adapter earns when the grader holds (hashing, expansion); None: load error.
EARNS: dict[str, tuple[int, int] | None] = {
    "numpy_scalars": (5, 5),
    "mutate_inputs": (5, 5),
    "factory_generator_exit": None,
    "import_interrupt": None,
    # no processor of its own, and the reference stands in from the grader only (issue
    # 32): its expansion item is "not provided", 0 points, where the others bring one
    "sandbox_escape": (0, 0),
}
SECRET = "8675309"


def _scratch() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="mmspec-threat-"))
    folder.chmod(0o755)
    source = folder / "source"
    (source / "rubrics").mkdir(parents=True)
    (source / "grading.env").write_text(f"SEED={SECRET}\n")
    (source / "grading.env").chmod(0o600)
    (source / "rubrics" / "default.toml").write_text("# the rubric\n")
    (source / "rubrics").chmod(0o700)
    (folder / "results").mkdir()
    (folder / "results" / "results.json").write_text('{"score": 0}')
    marker = folder / "marker"
    marker.mkdir()
    marker.chmod(0o1777)
    return folder


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 * 1024**3, 4 * 1024**3))


def run(name: str, setup: str) -> str:
    """'held', or what went wrong."""
    scratch = _scratch()
    seed_file = scratch / "seed"
    seed_file.write_text(SECRET)
    command = [
        sys.executable, "-m", "properties", "grade", str(HOSTILE / f"{name}.py"),
        "--rubric", str(HOSTILE / "rubric.toml"), "--profile", "ci", "--format", "json",
        "--quiet", "--seed-file", str(seed_file), "--hide-seed", *LIMITS,
    ]
    if setup == "in-process":
        command.append("--in-process")
    if setup == "sandbox":
        command += ["--sandbox-user", "mmspec-grader"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), AUTOGRADER_ROOT=str(scratch),
               MMSPEC_HOSTILE_MARKER=str(scratch / "marker"), MMSPEC_HOSTILE_PROBE_ONLY="1")
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=90, preexec_fn=_limit_memory, check=False)
    except subprocess.TimeoutExpired:
        return "NOT held: the grader ran past 90 s"
    finally:
        seconds = time.monotonic() - started
    time.sleep(4)  # what the adapter left behind would have acted by now
    try:
        return _judge(name, done, scratch) + f" ({seconds:.0f} s)"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _judge(name: str, done: subprocess.CompletedProcess[str], scratch: Path) -> str:
    if done.returncode not in (0, 1, 2):
        return f"NOT held: the grader exited {done.returncode}"
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return f"NOT held: no report (exit {done.returncode})"
    earns = EARNS.get(name, (0, 5))
    if earns is None:
        explained = done.returncode == 2 and "loading raised" in (report.get("load_error") or "")
        if not explained:
            return "NOT held: the load failure is not explained"
    else:
        scores = tuple(int(item["score"]) for item in report["items"])
        if scores != earns:
            return f"NOT held: scored {scores}, earns {earns}"
    own = {"attempts.jsonl", "slept"}  # what adapters keep there for themselves
    markers = sorted(p.name for p in (scratch / "marker").iterdir() if p.name not in own)
    if markers:
        return f"NOT held: it wrote {', '.join(markers)}"
    attempts = scratch / "marker" / "attempts.jsonl"
    if attempts.exists():
        succeeded = sorted({
            a["what"].split(" ")[0] if a["what"].startswith(("SIGSTOP", "prlimit")) else a["what"]
            for a in map(json.loads, attempts.read_text().splitlines())
            if a["done"] and a["what"] != "runs as"  # which user: a record, not an attempt
            and (a["what"] != "seed on a command line" or SECRET in a["got"])
        })
        if succeeded:
            return "NOT held: it could " + "; ".join(succeeded)
    return "held"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME")
    parser.add_argument("--setups", nargs="+", choices=SETUPS, default=list(SETUPS))
    args = parser.parse_args()
    names = args.only or sorted(
        p.stem for p in HOSTILE.glob("*.py") if p.stem not in ("hostile_common",)
    )
    print(f"{'adapter':24} " + " | ".join(f"{s:34}" for s in args.setups), flush=True)
    for name in names:
        cells = [run(name, setup) for setup in args.setups]
        print(f"{name:24} " + " | ".join(f"{c:34}" for c in cells), flush=True)


if __name__ == "__main__":
    main()

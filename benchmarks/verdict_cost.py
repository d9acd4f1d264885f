"""What a verdict costs: every user-facing path timed in one run, in CPU seconds and as a
multiple of a yardstick measured in the same run (issue 31).

    PYTHONPATH=. .venv/bin/python benchmarks/verdict_cost.py [--path NAME ...] [--json FILE]

The **yardstick** is a fixed pure-Python loop, ``sum(i * i for i in range(30_000_000))``,
timed (CPU) in a fresh interpreter: the same work on any machine, so "12 yardsticks"
means the same on a fast laptop and a loaded CI runner where "27 s" would not. A shared
virtual machine changes speed within minutes (here from 2.4 to 3.5 CPU s for the same
loop), so each path is charged in the mean of a yardstick run just before it and one
just after. Each path runs as its user runs it, as a whole process tree from a
fresh interpreter, and is charged its wall time and the CPU of every process it started
(``RUSAGE_CHILDREN``: the grader's isolated child, the forked workers, pytest's xdist
workers):

- ``verify``: the two commands ``make verify`` runs (the properties in the ``ci`` profile
  with ``--jobs 2``, then the bounded exhaustive search);
- ``grade``: ``make grade ADAPTER=reference``: the default rubric, the ``grading``
  profile, isolated, reproducers written and verified;
- ``grade-failing``: the same grade of a build with one failing clause (the zoo entry
  ``ecm_evicts_one_short``: ECM-5), its reproducer verified;
- ``grade-engine-bug``: the same grade of a build whose own engine loop breaks one clause
  (the zoo entry ``sys_reencodes_held``: SYS-3, which all six engine machines judge, each
  failing, shrinking and running again with SYS-3 set aside; the rest of the build is
  the reference's stand-ins, called back in the grader);
- ``plugin``: ``pytest -p harness.pytest_plugin --mmspec-adapter=reference`` in a folder
  outside the checkout (the installed wheel runs the same code: tests/test_wheel.py);
- ``plugin-xdist``: the same with pytest-xdist's ``-n 2``, as a team running its tests
  in two workers would (not in the default set);
- ``replay``: a failure's one-example replay line (``--replay VERSION:BLOB``: the
  failing build's shrunk ECM-5 test case), pasted into a shell in a folder outside the
  checkout (issue 33 asks under 2 s);
- ``kill-matrix``: ``python -m harness.kill_matrix`` (part of ``make test``);
- ``make-test``: ``make test`` as a whole (slow: not in the default set).

Prints one line per path as it finishes and a table at the end; ``--json`` saves the
figures. A figure, not a verdict: nothing here fails on a slow machine. Power (the kill
matrix, seed robustness, the vLLM mutation counts) is measured elsewhere
(benchmarks/seed_robustness.py, ``make kill-matrix``, benchmarks/vllm_mutation.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = str(ROOT / ".venv" / "bin" / "python")
sys.path.insert(0, str(ROOT))

from harness.report import EXAMPLE_REPLAY_HEADING  # noqa: E402 - after the path

#: The yardstick's body, run in a fresh interpreter; it prints its own CPU seconds.
YARDSTICK = (
    "import time; t = time.process_time(); sum(i * i for i in range(30_000_000)); "
    "print(time.process_time() - t)"
)

#: The zoo entry graded by ``grade-failing``: one clause (ECM-5) fails, nothing else.
FAILING_BUILD = "adapters/zoo/ecm_evicts_one_short.py"
#: The zoo entry graded by ``grade-engine-bug``: its engine loop breaks SYS-3.
ENGINE_BUG_BUILD = "adapters/zoo/sys_reencodes_held.py"

#: The test module the plugin path runs, written into a folder outside the checkout.
PLUGIN_TEST = "from harness.pytest_plugin import test_clause  # noqa: F401\n"


@dataclass(frozen=True)
class Figure:
    path: str
    wall_s: float
    cpu_s: float
    yardsticks: float
    exit_status: int


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def yardstick(runs: int = 1) -> float:
    """The median CPU seconds of ``runs`` runs of :data:`YARDSTICK`."""
    return statistics.median(
        float(subprocess.run([sys.executable, "-c", YARDSTICK], capture_output=True,
                             text=True, check=True).stdout)
        for _ in range(runs)
    )


def _timed(
    commands: list[list[str]], cwd: Path, env: dict[str, str], log: Path
) -> tuple[float, float, int]:
    """Run ``commands`` in turn (all of them, whatever their status): wall seconds, CPU
    seconds of every process they started, and the first non-zero exit status."""
    cpu0, wall0, status = _children_cpu(), time.perf_counter(), 0
    with log.open("ab") as out:
        for command in commands:
            done = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=out, check=False)
            status = status or done.returncode
    return time.perf_counter() - wall0, _children_cpu() - cpu0, status


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _grade(adapter: str, scratch: Path) -> list[list[str]]:
    return [[PYTHON, "-m", "properties", "grade", adapter, "--profile", "grading",
             "--reproducers", str(scratch / "reproducers"), "--out", str(scratch / "report.txt")]]


def _plugin(scratch: Path, *options: str) -> list[list[str]]:
    folder = scratch / "team"
    folder.mkdir(exist_ok=True)
    (folder / "test_mmspec.py").write_text(PLUGIN_TEST, encoding="utf-8")
    return [[PYTHON, "-m", "pytest", "-q", "-p", "harness.pytest_plugin",
             "--mmspec-adapter=reference", "-p", "no:cacheprovider", *options, str(folder)]]


def _replay(scratch: Path) -> list[list[str]]:
    """The one-example replay line the failing build's ECM-5 failure prints, pasted into
    a shell in another folder; the run that prints it is not timed."""
    found = subprocess.run(
        [PYTHON, "-m", "properties", "verify", "--adapter", FAILING_BUILD, "--profile", "ci",
         "--only", "EncoderCacheMachine"],
        cwd=ROOT, env=_env(), capture_output=True, text=True, check=False,
    )
    lines = found.stdout.splitlines()
    return [["bash", "-c", lines[lines.index(EXAMPLE_REPLAY_HEADING) + 1].strip()]]


#: Each path: how to build its commands (given a scratch folder) and where they run.
PATHS: dict[str, Callable[[Path], list[list[str]]]] = {
    "verify": lambda _s: [
        [PYTHON, "-m", "properties", "verify", "--profile", "ci", "--jobs", "2"],
        [PYTHON, "-m", "properties", "verify", "--exhaustive", "bounded"],
    ],
    "grade": lambda s: _grade("reference", s),
    "grade-failing": lambda s: _grade(FAILING_BUILD, s),
    "grade-engine-bug": lambda s: _grade(ENGINE_BUG_BUILD, s),
    "plugin": _plugin,
    "plugin-xdist": lambda s: _plugin(s, "-n", "2"),
    "replay": _replay,
    "kill-matrix": lambda _s: [[PYTHON, "-m", "harness.kill_matrix"]],
    "make-test": lambda _s: [["make", "--no-print-directory", "test"]],
}
DEFAULT_PATHS = ("verify", "grade", "grade-failing", "grade-engine-bug", "plugin", "replay")


def measure(path: str, before: float, log: Path) -> tuple[Figure, float]:
    """The path's figure, charged in the mean of ``before`` (a yardstick just before
    it) and a yardstick run just after it, which is returned for the next path."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        cwd = folder if path in ("plugin", "plugin-xdist", "replay") else ROOT
        wall, cpu, status = _timed(PATHS[path](folder), cwd, _env(), log)
    after = yardstick()
    unit = (before + after) / 2
    return Figure(path, round(wall, 1), round(cpu, 1), round(cpu / unit, 1), status), after


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--path", nargs="+", choices=sorted(PATHS), default=list(DEFAULT_PATHS))
    parser.add_argument("--json", type=Path, help="save the figures here")
    parser.add_argument(
        "--log", type=Path, default=Path(tempfile.gettempdir()) / "verdict_cost.log",
        help="what the timed commands print (appended)",
    )
    args = parser.parse_args(argv)
    unit = yardstick(3)
    units = [unit]
    print(f"yardstick: {unit:.2f} CPU s (sum of squares below 30e6, median of 3); "
          f"{os.cpu_count()} CPUs; output of the commands in {args.log}", flush=True)
    figures: list[Figure] = []
    for path in args.path:
        figure, unit = measure(path, unit, args.log)
        units.append(unit)
        figures.append(figure)
        print(f"{path}: {figure.wall_s} s wall, {figure.cpu_s} CPU s = "
              f"{figure.yardsticks} yardsticks (exit {figure.exit_status}; yardstick "
              f"after it {unit:.2f} CPU s)", flush=True)
    print(f"\n{'path':<14} {'wall s':>8} {'CPU s':>8} {'yardsticks':>10} {'exit':>4}")
    for f in figures:
        print(f"{f.path:<14} {f.wall_s:>8} {f.cpu_s:>8} {f.yardsticks:>10} {f.exit_status:>4}")
    if args.json is not None:
        args.json.write_text(json.dumps({"yardsticks_cpu_s": units,
                                         "figures": [asdict(f) for f in figures]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

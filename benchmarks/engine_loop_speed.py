"""Steps per second of the engine loop under ``EngineMachine``: vLLM's ``Scheduler``
(the vLLM adapter's engine loop, issue 16) next to the reference loop.

    PYTHONPATH=. .venv-vllm/bin/python benchmarks/engine_loop_speed.py \\
        [--vllm-src .vllm-cache/vllm-0.33.0] [--profile ci]

Each loop runs in a child process of its own (one vLLM tree per process): the property
``EngineMachine`` in the given profile, with the adapter's engine-loop factory wrapped so
that every ``step()`` is counted and timed. Printed per loop: the machine's time (from
its first engine to its last step: imports and loading excluded), the steps it ran, the
time spent inside ``step()`` and steps per second of that time (the loop's own speed:
schedule, the model-runner stand-in, update), and steps per second of the machine's time
(its checks, shrinking and engine construction included). The two loops do not run the
same programs — the machine's rules read the engine's state — so compare rates, not
counts. A benchmark, not a test: nothing asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_TIMED_ADAPTER = '''
import atexit, dataclasses, json, time
from pathlib import Path

from {module} import ADAPTER as INNER

LOG = Path({log!r})
COUNT = {{"steps": 0, "seconds": 0.0, "first": None, "last": None}}
atexit.register(lambda: LOG.write_text(json.dumps(COUNT)))


class Timed:
    """The engine loop, with every step counted and timed."""

    def __init__(self, inner):
        self.inner = inner

    def add_request(self, request):
        self.inner.add_request(request)

    def step(self):
        started = time.perf_counter()
        try:
            return self.inner.step()
        finally:
            COUNT["seconds"] += time.perf_counter() - started
            COUNT["steps"] += 1
            COUNT["last"] = time.perf_counter()

    def abort(self, request_id):
        self.inner.abort(request_id)

    def preempt(self, request_id):
        self.inner.preempt(request_id)

    def snapshot(self):
        return self.inner.snapshot()


def _engine_loop(config, parts):
    if COUNT["first"] is None:
        COUNT["first"] = time.perf_counter()
    return Timed(INNER.engine_loop(config, parts))


ADAPTER = dataclasses.replace(INNER, engine_loop=_engine_loop)
'''

_RUN = """
import json, sys, time
from harness.runner import verify
started = time.perf_counter()
report = verify(sys.argv[1], sys.argv[2], only=["EngineMachine"])
print(json.dumps({"wall": time.perf_counter() - started,
                  "verdicts": sorted({r.verdict.value for r in report.rows}),
                  "name": report.provenance.get("engine_loop")}))
"""


def run_loop(module: str, vllm_src: Path | None, profile: str, scratch: Path) -> dict[str, object]:
    log = scratch / f"{module.replace('.', '_')}.json"
    adapter = scratch / f"timed_{module.replace('.', '_')}.py"
    adapter.write_text(_TIMED_ADAPTER.format(module=module, log=str(log)))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MMSPEC_VLLM_SRC", None)
    if vllm_src is not None:
        env["MMSPEC_VLLM_SRC"] = str(vllm_src)
    completed = subprocess.run(
        [sys.executable, "-c", _RUN, str(adapter), profile],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )
    if completed.returncode != 0:
        raise SystemExit(f"{module}: the run failed\n{completed.stderr[-3000:]}")
    result: dict[str, object] = json.loads(completed.stdout.strip().splitlines()[-1])
    result.update(json.loads(log.read_text()))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/engine_loop_speed.py", description=__doc__)
    parser.add_argument("--vllm-src", type=Path, default=ROOT / ".vllm-cache" / "vllm-0.33.0")
    parser.add_argument("--profile", default="ci")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        rows = [
            ("reference loop", run_loop("reference.adapter", None, args.profile, Path(scratch))),
            (f"vLLM's Scheduler ({args.vllm_src.name})",
             run_loop("adapters.vllm", args.vllm_src.resolve(), args.profile, Path(scratch))),
        ]
    print(f"EngineMachine, profile {args.profile}")
    print(f"{'engine loop':34} {'run s':>7} {'steps':>7} {'in step s':>9} "
          f"{'steps/s (step)':>14} {'steps/s (run)':>13}  verdicts")
    for name, r in rows:
        steps, inside = int(str(r["steps"])), float(str(r["seconds"]))
        wall = float(str(r["last"])) - float(str(r["first"]))
        verdicts = ",".join(str(v) for v in r["verdicts"])  # type: ignore[attr-defined]
        print(f"{name:34} {wall:7.1f} {steps:7d} {inside:9.2f} {steps / inside:14.0f} "
              f"{steps / wall:13.0f}  {verdicts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

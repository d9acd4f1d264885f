"""What isolation costs: the round trip of one call, and the ``ci`` grading run of the
reference in process vs isolated (docs/grading.md, "Isolation").

    PYTHONPATH=. .venv/bin/python benchmarks/isolation_overhead.py [--calls N] [--no-grade]

Prints microseconds per call (a hasher call on 64 bytes and a cache-manager property
read, each in process and isolated), then the wall-clock and CPU time of
``grade reference --profile ci`` both ways (the child's CPU included), and their ratios.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections.abc import Callable

from harness.grading.grade import grade
from harness.grading.rubric import load_rubric
from harness.isolation import IsolatedSession, Limits
from reference.adapter import ADAPTER as REFERENCE


def _per_call(action: Callable[[], object], calls: int) -> float:
    action()  # warm up
    started = time.perf_counter()
    for _ in range(calls):
        action()
    return (time.perf_counter() - started) / calls * 1e6


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def micro(calls: int) -> None:
    assert REFERENCE.hasher is not None and REFERENCE.encoder_cache_manager is not None
    data = bytes(range(64))
    local_hasher = REFERENCE.hasher()
    local_cache = REFERENCE.encoder_cache_manager(64)
    with IsolatedSession("reference", Limits()) as session:
        session.begin_property("benchmark")
        adapter = session.loaded.adapter
        assert adapter.hasher is not None and adapter.encoder_cache_manager is not None
        remote_hasher = adapter.hasher()
        remote_cache = adapter.encoder_cache_manager(64)
        rows = [
            ("hash_item(64 bytes)", lambda: local_hasher.hash_item(data),
             lambda: remote_hasher.hash_item(data)),
            ("cache.num_free_slots", lambda: local_cache.num_free_slots,
             lambda: remote_cache.num_free_slots),
        ]
        print(f"per-call cost, mean of {calls} calls (µs):")
        print(f"  {'call':24} {'in-process':>10} {'isolated':>10} {'overhead':>10}")
        for name, local, remote in rows:
            a, b = _per_call(local, calls), _per_call(remote, calls)
            print(f"  {name:24} {a:10.1f} {b:10.1f} {b - a:10.1f}")


def grading_run() -> None:
    rubric = load_rubric()
    figures = {}
    for label, limits in (("in-process", None), ("isolated", Limits())):
        cpu, wall = _cpu(), time.perf_counter()
        report = grade("reference", rubric, "ci", reproducers=False, isolation=limits)
        figures[label] = (time.perf_counter() - wall, _cpu() - cpu)
        assert report.score == report.max_score, f"{label}: {report.score}"
    (w0, c0), (w1, c1) = figures["in-process"], figures["isolated"]
    print(f"grade reference --profile ci ({os.cpu_count()} CPUs):")
    print(f"  in-process  wall {w0:6.1f} s  CPU {c0:6.1f} s")
    print(f"  isolated    wall {w1:6.1f} s  CPU {c1:6.1f} s")
    print(f"  ratio       wall {w1 / w0:6.2f}×   CPU {c1 / c0:6.2f}×")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--no-grade", action="store_true")
    args = parser.parse_args()
    micro(args.calls)
    if not args.no_grade:
        grading_run()


if __name__ == "__main__":
    main()

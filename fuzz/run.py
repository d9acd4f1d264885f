"""``python -m fuzz.run``: fuzz the properties against an adapter with atheris (``make fuzz``).

    python -m fuzz.run [--adapter REF] [--only NAME ...] [--redis URL]
                       [--runs N | --duration SECONDS] [--seed N] [--stop-on-failure]
                       [-- LIBFUZZER_FLAG ...]

Failures are saved to the adapter's example database (see :mod:`fuzz.targets`): the
shared Redis one with ``--redis`` or ``MMSPEC_REDIS_URL``, its directory otherwise. The
run records every failure and goes on (``--stop-on-failure``: libFuzzer's own behaviour,
stop at the first and write a crash file); it ends after ``--runs`` test cases or
``--duration`` seconds, prints what it found, and exits 1 if anything failed, 0 if not,
2 for bad input. libFuzzer runs with ``-len_control=0`` unless told otherwise:
Hypothesis needs long inputs from the start (a state machine's program is hundreds of
bytes), and the default ramp from a few bytes up delays every finding. Only project
code (spec/, reference/, adapters/, properties/ and the adapter's own file) is
instrumented for coverage: instrumenting every loaded function (numpy, Hypothesis) takes
a minute and guides towards nothing of the spec's.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fuzz.targets import (
    Dispatcher,
    FuzzSelectionError,
    build_targets,
    describe_database,
    fuzz_database,
)
from harness.catalog import registered_properties
from harness.loader import (
    CHECKOUT_ROOT,
    REFERENCE_REF,
    AdapterLoadError,
    build_parts,
    load_adapter,
)
from harness.profiles import REDIS_URL_ENV, SharedDatabaseError, redis_url

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2

#: Project code worth coverage feedback (the fuzz driver itself is not).
_INSTRUMENTED = ("spec", "reference", "adapters", "properties")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        import atheris  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError as e:
        print(f"atheris is not installed ({e}): run `make fuzz-setup`", file=sys.stderr)
        return EXIT_USAGE
    url = args.redis or redis_url()
    try:
        loaded = load_adapter(args.adapter)
        reference = loaded if loaded.ref == REFERENCE_REF else load_adapter(REFERENCE_REF)
        parts = build_parts(loaded.adapter, reference.adapter)
        database = fuzz_database(loaded.identity, url)
        targets, left_out = build_targets(
            registered_properties(), loaded, parts, database, args.only
        )
    except (AdapterLoadError, FuzzSelectionError, SharedDatabaseError) as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE

    roots = [CHECKOUT_ROOT / name for name in _INSTRUMENTED] + [Path(loaded.origin).parent]
    instrumented = instrument_project(atheris, roots)
    print(f"fuzzing {loaded.name} ({loaded.identity}): {len(targets)} propert"
          f"{'y' if len(targets) == 1 else 'ies'}, {instrumented} functions instrumented; "
          f"failures go to {describe_database(loaded.identity, url)}", flush=True)
    for line in left_out:
        print(f"  left out: {line}", flush=True)

    def finish(dispatcher: Dispatcher) -> None:
        print(dispatcher.summary(), flush=True)
        if dispatcher.found:
            print("replay them: python -m properties verify --profile dev "
                  f"--adapter {args.adapter}" + (f" (with {REDIS_URL_ENV}={url})" if url else ""),
                  flush=True)
        sys.stderr.flush()
        # libFuzzer never returns from Fuzz(); end here, with our own exit status.
        os._exit(EXIT_FOUND if dispatcher.found else EXIT_OK)

    dispatcher = Dispatcher(
        targets,
        finish,
        max_runs=args.runs,
        max_seconds=args.duration,
        stop_on_failure=args.stop_on_failure,
    )
    flags = [f"-seed={args.seed}"] if args.seed is not None else []
    if not any(flag.startswith("-len_control=") for flag in args.libfuzzer):
        # Hypothesis reads many bytes per test case (a machine's program: hundreds);
        # libFuzzer's default starts from inputs of a few bytes and grows them slowly.
        flags.append("-len_control=0")
    atheris.Setup([sys.argv[0], *flags, *args.libfuzzer], dispatcher)
    atheris.Fuzz()
    return EXIT_OK  # not reached: Fuzz() exits the process


def instrument_project(atheris: Any, roots: Sequence[Path]) -> int:
    """Add atheris' coverage instrumentation to every loaded function defined under
    ``roots`` (including the properties' ``@given`` closures, already built)."""
    prefixes = tuple(f"{root.resolve()}{os.sep}" for root in roots)
    count = 0
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and obj.__code__.co_filename.startswith(prefixes):
            atheris.instrument_func(obj)
            count += 1
    return count


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fuzz.run",
        description="Coverage-guided fuzzing of the properties (atheris + Hypothesis).",
    )
    parser.add_argument("--adapter", default=REFERENCE_REF, metavar="REF",
                        help=f"module name, .py file or package directory (default: "
                        f"{REFERENCE_REF})")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="fuzz only these properties (or the properties of these clauses)")
    parser.add_argument("--redis", metavar="URL",
                        help=f"the shared example database, redis://host:port/db "
                        f"(default: ${REDIS_URL_ENV}; unset: the adapter's directory)")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--runs", type=_positive_int, metavar="N",
                        help="stop after N test cases (repeatable with --seed)")
    budget.add_argument("--duration", type=_positive_float, metavar="SECONDS",
                        help="stop after this many seconds")
    parser.add_argument("--seed", type=int, metavar="N", help="libFuzzer's seed")
    parser.add_argument("--stop-on-failure", action="store_true",
                        help="stop at the first failure (libFuzzer's default behaviour)")
    parser.add_argument("libfuzzer", nargs="*", metavar="-- LIBFUZZER_FLAG",
                        help="flags passed on to libFuzzer, e.g. -- -max_len=512")
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: must be a positive integer")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: must be a positive number of seconds")
    return value


if __name__ == "__main__":
    sys.exit(main())

"""``python -m fuzz.replay``: replay what the example databases hold for an adapter,
generating nothing.

    python -m fuzz.replay [--adapter REF] [--only NAME ...] [--redis URL]

Each selected property runs under the ``dev`` profile's settings restricted to
Hypothesis' *reuse* phase: only the test cases stored for this adapter run (its
directory, the other adapters' directories and, with a shared database, every adapter's
key space in it: what ``verify --profile dev`` reads); none is generated, none is
shrunk, and nothing is written to any database. So a failure reported here is one a
fuzz worker (or an earlier run) found and stored, replayed as it was — the evidence that
sharing works, and a quick triage of a shared database. Exit 1 when a stored test case
fails, 0 when none does (or none is stored), 2 for bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
import unittest
from collections.abc import Iterator, Sequence

from hypothesis import Phase, settings
from hypothesis.database import ReadOnlyDatabase

from fuzz.targets import (
    FUZZ_PROFILE,
    FuzzSelectionError,
    missing_subject,
    select_properties,
)
from harness.catalog import registered_properties
from harness.loader import REFERENCE_REF, AdapterLoadError, build_parts, load_adapter
from harness.profiles import (
    REDIS_URL_ENV,
    SharedDatabaseError,
    example_database,
    profile_settings,
    redis_url,
)
from properties.framework import ClauseViolation

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.redis:
        os.environ[REDIS_URL_ENV] = args.redis
    registry = registered_properties()
    try:
        names = select_properties(registry, args.only)
        loaded = load_adapter(args.adapter)
        reference = loaded if loaded.ref == REFERENCE_REF else load_adapter(REFERENCE_REF)
        parts = build_parts(loaded.adapter, reference.adapter)
        database = ReadOnlyDatabase(example_database(loaded.identity))
    except (AdapterLoadError, FuzzSelectionError, SharedDatabaseError) as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    where = redis_url()
    print(f"replaying the stored test cases of {loaded.name} ({loaded.identity})"
          + (f", with the shared database {where}" if where else ""))
    replay_only = settings(
        profile_settings(FUZZ_PROFILE), database=database, phases=(Phase.reuse,)
    )
    failed = False
    for name in names:
        spec = registry[name]
        if missing_subject(spec, loaded):
            continue
        runnable = spec.build(parts)
        try:
            runnable.run(replay_only)
        except unittest.SkipTest:  # Hypothesis: no phase left that could run a test case
            if args.only:
                print(f"{name}: nothing stored")
            continue
        except Exception as e:  # noqa: BLE001 - every stored failure is reported
            failed = True
            print(f"{name}: stored test cases replayed ({runnable.examples} runs):")
            for line in _describe(e):
                print(f"  {line}")
            continue
        print(f"{name}: stored test cases replayed ({runnable.examples} runs): all pass")
    return EXIT_FAILED if failed else EXIT_OK


def _describe(error: BaseException) -> Iterator[str]:
    if isinstance(error, BaseExceptionGroup):
        for member in error.exceptions:
            yield from _describe(member)
    elif isinstance(error, ClauseViolation):
        yield f"FAIL {error.clause}: {error.detail}"
    else:
        yield f"ERROR {type(error).__name__}: {error}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fuzz.replay",
        description="Replay the stored test cases of an adapter, generating nothing.",
    )
    parser.add_argument("--adapter", default=REFERENCE_REF, metavar="REF")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="replay only these properties (or the properties of these clauses)")
    parser.add_argument("--redis", metavar="URL",
                        help=f"the shared example database (default: ${REDIS_URL_ENV})")
    return parser


if __name__ == "__main__":
    sys.exit(main())

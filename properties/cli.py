"""Command line: ``python -m properties verify`` and ``python -m properties list``.

Exit codes of ``verify``: 0 when every clause row is ``pass`` or ``not provided``, 1
when any is not, 2 when the adapter is malformed (or the command line is wrong).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from properties.catalog import registered_properties
from properties.loader import REFERENCE_REF, AdapterLoadError
from properties.profiles import DEFAULT_PROFILE, PROFILES
from properties.report import render
from properties.runner import PropertyResult, UnknownSelectionError, plan, verify
from spec.clauses import load_clauses

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "verify":
        return _verify(args.adapter, args.profile, args.only)
    return _list()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m properties",
        description="Run the executable specification's properties against an adapter.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("verify", help="run the properties and print one verdict per clause")
    run.add_argument(
        "--adapter",
        default=REFERENCE_REF,
        metavar="REF",
        help="module name, .py file or package directory exposing ADAPTER "
        f"(default: {REFERENCE_REF})",
    )
    run.add_argument("--profile", default=DEFAULT_PROFILE, choices=PROFILES)
    run.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help="run only these properties (or the properties of these clause ids)",
    )
    commands.add_parser("list", help="list the clauses and the properties that check them")
    return parser


def _verify(adapter: str, profile: str, only: Sequence[str] | None) -> int:
    try:
        report = verify(adapter, profile, only, progress=_progress)
    except AdapterLoadError as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    except UnknownSelectionError as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(render(report))
    return EXIT_OK if report.ok else EXIT_FAILED


def _progress(index: int, total: int, name: str, result: PropertyResult | None) -> None:
    if result is None:
        print(f"[{index}/{total}] {name} ...", end="", file=sys.stderr, flush=True)
    else:
        print(
            f" {result.verdict.value} ({result.seconds:.1f} s)",
            file=sys.stderr,
            flush=True,
        )


def _list() -> int:
    clauses = load_clauses()
    registry = registered_properties()
    print("clauses (SPEC.md) and the properties that check them:")
    by_clause: dict[str, list[str]] = {}
    for clause, name in plan(clauses, registry):
        by_clause.setdefault(clause, [])
        if name is not None:
            by_clause[clause].append(name if name in registry else f"{name} (MISSING)")
    for clause_id, names in by_clause.items():
        title = clauses[clause_id].title if clause_id in clauses else "(not in SPEC.md)"
        print(f"  {clause_id:8} {title}: {', '.join(names) or '(no property)'}")
    print()
    print("properties (name: clauses; subject components; also uses):")
    for spec in registry.values():
        uses = f"; uses {', '.join(spec.uses)}" if spec.uses else ""
        print(
            f"  {spec.name}: {', '.join(spec.clauses)}; subject {', '.join(spec.subject)}"
            f"{uses}  [{spec.module}]"
        )
    return EXIT_OK

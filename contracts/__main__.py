"""``python -m contracts``: CrossHair on every contract (docs/crosshair.md).

    python -m contracts [--adapter REF] [--only NAME ...] [--scale F]
    python -m contracts --rejections [--only NAME ...]

The first form applies each contract to one adapter (default: the reference) and prints
a verdict per contract with the iterations explored and the time taken; it exits 1 when
a counterexample is found (or a contract is broken). ``--scale`` multiplies every
contract's iteration bound (CI's short run uses 0.25).

``--rejections`` is the evidence of power: each contract applied to every zoo entry and
mutant it lists in ``rejects`` must yield a counterexample within the contract's
iteration bound; exits 1 when one survives.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from contracts.catalog import CONTRACTS, contract_named
from contracts.contract import Contract, Implementation
from contracts.mutants import MUTANTS
from contracts.search import Outcome, SearchResult, search
from harness.loader import AdapterLoadError, load_adapter
from harness.zoo import ZOO_PACKAGE

_MUTANT_PREFIX = "mutants."


def _implementation(contract: Contract[Any, Any], target: str) -> Implementation[Any, Any] | None:
    """``target`` is a mutant (``mutants.NAME``), a zoo entry's short name, or any
    adapter reference ``harness.loader`` accepts."""
    if target.startswith(_MUTANT_PREFIX):
        name = target.removeprefix(_MUTANT_PREFIX)
        if name not in MUTANTS:
            raise SystemExit(f"unknown mutant {name!r}; the mutants are {', '.join(MUTANTS)}")
        contract_name, mutant = MUTANTS[name]
        return mutant if contract_name == contract.name else None
    ref = target if "." in target or "/" in target or target == "reference" else (
        f"{ZOO_PACKAGE}.{target}"
    )
    return contract.implementation(load_adapter(ref).adapter)


def _print(result: SearchResult) -> None:
    print(
        f"{result.contract:24} {result.target:34} {result.outcome.value:22} "
        f"{result.iterations:5d} iterations {result.seconds:7.1f} s",
        flush=True,
    )
    if result.detail:
        print(f"    {result.detail}", flush=True)


def _selected(only: Sequence[str] | None) -> list[Contract[Any, Any]]:
    return [contract_named(name) for name in only] if only else list(CONTRACTS)


def check_adapter(target: str, contracts: Sequence[Contract[Any, Any]], scale: float) -> int:
    failed = False
    for contract in contracts:
        implementation = _implementation(contract, target)
        if implementation is None:
            print(f"{contract.name:24} {target:34} not provided", flush=True)
            continue
        iterations = max(1, round(contract.iterations * scale))
        result = search(contract, implementation, target, iterations)
        _print(result)
        failed |= result.outcome in (Outcome.COUNTEREXAMPLE, Outcome.ERROR)
    return 1 if failed else 0


def check_rejections(contracts: Sequence[Contract[Any, Any]]) -> int:
    survivors: list[str] = []
    for contract in contracts:
        for target in contract.rejects:
            implementation = _implementation(contract, target)
            if implementation is None:
                survivors.append(f"{contract.name} / {target} (not provided)")
                continue
            result = search(contract, implementation, target, contract.iterations)
            _print(result)
            if result.outcome is not Outcome.COUNTEREXAMPLE:
                survivors.append(f"{contract.name} / {target}")
    if survivors:
        print(f"not rejected within the bounds: {', '.join(survivors)}")
        return 1
    print(f"every contract rejected its {sum(len(c.rejects) for c in contracts)} targets")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m contracts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adapter", default="reference",
                        help="adapter reference, zoo entry name, or mutants.NAME")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="contract names")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every contract's iteration bound (default 1)")
    parser.add_argument("--rejections", action="store_true",
                        help="check that every contract rejects the entries it lists")
    parser.add_argument("--list", action="store_true", help="list the contracts and exit")
    args = parser.parse_args(argv)
    if args.scale <= 0:
        parser.error(f"--scale must be positive, got {args.scale}")
    try:
        contracts = _selected(args.only)
    except KeyError as e:
        parser.error(str(e.args[0]))
    if args.list:
        for contract in contracts:
            print(f"{contract.name:24} {', '.join(contract.clauses):28} {contract.subject}")
            print(f"{'':24} rejects: {', '.join(contract.rejects)}")
        return 0
    try:
        if args.rejections:
            return check_rejections(contracts)
        return check_adapter(args.adapter, contracts, args.scale)
    except (AdapterLoadError, RuntimeError) as e:  # a bad adapter, or no CrossHair here
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

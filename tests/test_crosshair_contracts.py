"""The CrossHair contracts (contracts, docs/crosshair.md).

Two layers:

- without CrossHair (any interpreter): each contract, evaluated concretely, holds for the
  reference on a few cases of its domain and fails for each target it must reject on a
  witness case — the wiring between contract, wrapper and component is sound;
- with CrossHair (``.venv-crosshair``: ``make crosshair-ci``, which CI runs): the
  bounded symbolic search finds no counterexample on the reference (the short run, at a
  quarter of the bounds) and finds one for every zoo entry and mutant each contract
  lists. In the main ``.venv`` these tests are skipped, naming the target that runs them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from contracts import catalog
from contracts.catalog import (
    BudgetCase,
    ByteSizeCase,
    EmbedsCase,
    ExpansionCase,
    ExtraKeysCase,
    FixedCase,
    ImageSizeCase,
    ScheduleCase,
)
from contracts.contract import Contract, Implementation, holds
from contracts.mutants import MUTANTS
from contracts.search import Outcome, crosshair_available, search
from harness.loader import load_adapter
from spec.clauses import load_clauses

#: A case on which each target violates its contract (the shortest counterexamples
#: CrossHair reported, or a hand-picked one), by (contract, target).
WITNESSES: dict[tuple[str, str], Any] = {
    ("expansion_arithmetic", "exp_off_by_one_offset"): ExpansionCase(0, 1, 1, 1, 1),
    ("toy_token_count", "exp_toy_ceil"): ByteSizeCase(64),
    ("fixed_token_count", "exp_fixed_counts_cls"): FixedCase(1, 1),
    ("dynamic_token_count", "exp_dynamic_forgets_merge"): ImageSizeCase(4046, 4046),
    ("tiled_token_count", "exp_tiled_tie_keeps_smaller"): ImageSizeCase(634, 634),
    ("rowbreak_range", "exp_pixtral_floor"): ImageSizeCase(1023, 1024),
    ("embeds_in_range", "mutants.embeds_end_inclusive"): EmbedsCase(1, False, 0, 0, 0),
    ("embeds_in_range", "mutants.embeds_ignore_mask"): EmbedsCase(1, True, 0, 0, 0),
    ("scheduling_hook", "sch_budget_not_decremented"): ScheduleCase(0, 2, 0, 1, 0, 1, 2, 2, 0),
    ("scheduling_hook", "sch_exact_budget_refused"): ScheduleCase(0, 1, 0, 2, 0, 1, 3, 3, 1),
    ("scheduling_hook", "sch_truncate_one_early"): ScheduleCase(0, 1, 0, 1, 0, 1, 2, 1, 1),
    ("scheduling_hook", "sch_window_one_past"): ScheduleCase(1, 2, 0, 1, 0, 1, 2, 2, 0),
    ("encoder_budget_sizing", "sch_budget_ignores_largest_item"): BudgetCase(
        1, 0, 1, 0, 1, True
    ),
    ("block_extra_keys", "pfx_no_offset"): ExtraKeysCase(0, 1, 0, 1, 0, 2),
    ("block_extra_keys", "pfx_key_by_size"): ExtraKeysCase(0, 1, 0, 2, 0, 2),
}

#: Cases inside each domain on which the reference must satisfy the contract, the
#: witnesses above included.
REFERENCE_CASES: dict[str, list[Any]] = {
    "expansion_arithmetic": [ExpansionCase(0, 0, 0, 1, 1), ExpansionCase(3, 2, 1, 64, 200)],
    "toy_token_count": [ByteSizeCase(1), ByteSizeCase(63), ByteSizeCase(128)],
    "fixed_token_count": [FixedCase(576, 7), FixedCase(2048, 4096)],
    "dynamic_token_count": [ImageSizeCase(1, 200), ImageSizeCase(4000, 20), ImageSizeCase(28, 28)],
    "tiled_token_count": [ImageSizeCase(448, 448), ImageSizeCase(100, 4096)],
    "rowbreak_range": [ImageSizeCase(1, 1), ImageSizeCase(16, 17), ImageSizeCase(1024, 3)],
    "embeds_in_range": [EmbedsCase(8, True, 0b10110110, 2, 7), EmbedsCase(3, False, 0, 1, 3)],
    "scheduling_hook": [
        ScheduleCase(4, 6, 2, 5, 0, 20, 30, 30, 1),  # both fit
        ScheduleCase(4, 6, 2, 5, 0, 20, 8, 30, 0),  # the second stops the chunk
        ScheduleCase(4, 6, 0, 5, 6, 2, 0, 1, 0),  # inside the first, nothing fits
    ],
    "encoder_budget_sizing": [BudgetCase(0, 0, 0, 0, 0, False), BudgetCase(5, 5, 3, 4, 9, True)],
    "block_extra_keys": [ExtraKeysCase(3, 10, 2, 4, 8, 16), ExtraKeysCase(0, 1, 0, 1, 5, 6)],
}


def _implementation(contract: Contract[Any, Any], target: str) -> Implementation[Any, Any]:
    if target.startswith("mutants."):
        _, mutant = MUTANTS[target.removeprefix("mutants.")]
        return mutant
    ref = target if target == "reference" else f"adapters.zoo.{target}"
    implementation = contract.implementation(load_adapter(ref).adapter)
    assert implementation is not None, f"{target} does not provide {contract.subject}"
    return implementation


def test_every_contract_lists_witnessed_rejections_and_reference_cases() -> None:
    listed = {(c.name, target) for c in catalog.CONTRACTS for target in c.rejects}
    assert listed == set(WITNESSES)
    assert {c.name for c in catalog.CONTRACTS} == set(REFERENCE_CASES)
    assert all(contract.rejects for contract in catalog.CONTRACTS)


@pytest.mark.parametrize(("contract_name", "target"), sorted(WITNESSES))
def test_contract_fails_on_its_target_and_holds_on_the_reference(
    contract_name: str, target: str
) -> None:
    contract = catalog.contract_named(contract_name)
    case = WITNESSES[(contract_name, target)]
    assert holds(contract, _implementation(contract, target), case) is not None
    assert holds(contract, _implementation(contract, "reference"), case) is None


@pytest.mark.parametrize(
    ("contract_name", "case"),
    [(name, case) for name, cases in REFERENCE_CASES.items() for case in cases],
)
def test_reference_satisfies_contract(contract_name: str, case: Any) -> None:
    contract = catalog.contract_named(contract_name)
    assert holds(contract, _implementation(contract, "reference"), case) is None


def test_case_outside_the_domain_is_refused() -> None:
    with pytest.raises(ValueError, match="outside the domain"):
        holds(catalog.TOY, _implementation(catalog.TOY, "reference"), ByteSizeCase(0))


# --- the symbolic search (in .venv-crosshair) ---------------------------------------------

needs_crosshair = pytest.mark.skipif(
    not crosshair_available(),
    reason="CrossHair is installed in .venv-crosshair only: `make crosshair-ci` runs these",
)
#: The tests of what a user without CrossHair sees: nothing to do where it is installed.
WITHOUT_CROSSHAIR = (
    "CrossHair is installed here, and this test checks the message shown without it"
    " (nothing to do: the plain .venv runs it)"
)

#: CI's short run on the reference: this fraction of each contract's iteration bound.
SHORT_SCALE = 0.25


@needs_crosshair
@pytest.mark.parametrize("contract_name", [c.name for c in catalog.CONTRACTS])
def test_crosshair_finds_no_counterexample_on_the_reference(contract_name: str) -> None:
    contract = catalog.contract_named(contract_name)
    iterations = max(1, round(contract.iterations * SHORT_SCALE))
    result = search(contract, _implementation(contract, "reference"), "reference", iterations)
    assert result.outcome in (Outcome.NONE_FOUND, Outcome.CONFIRMED), result.detail
    assert 1 <= result.iterations <= iterations


@needs_crosshair
@pytest.mark.parametrize(("contract_name", "target"), sorted(WITNESSES))
def test_crosshair_rejects_the_target_within_the_bound(contract_name: str, target: str) -> None:
    contract = catalog.contract_named(contract_name)
    result = search(contract, _implementation(contract, target), target, contract.iterations)
    assert result.outcome is Outcome.COUNTEREXAMPLE, (
        f"{target} survived {result.iterations} iterations of {contract_name}"
    )
    assert "AssertionError" in result.detail, result.detail  # the contract, not a crash


@needs_crosshair
def test_same_bound_same_verdict() -> None:
    """Bounded by iterations, the search repeats: same paths, same counterexample."""
    contract = catalog.SCHEDULING
    implementation = _implementation(contract, "sch_exact_budget_refused")
    first, second = (
        search(contract, implementation, "sch_exact_budget_refused", contract.iterations)
        for _ in range(2)
    )
    assert (first.outcome, first.iterations, first.detail) == (
        second.outcome,
        second.iterations,
        second.detail,
    )


def test_spec_lists_every_contract_with_its_clauses() -> None:
    """SPEC.md's "Contracts (CrossHair)" table names each contract and its clauses."""
    spec = (Path(__file__).resolve().parents[1] / "spec" / "SPEC.md").read_text("utf-8")
    section = spec.split("## Contracts (CrossHair)", 1)[1]
    rows = {
        match["name"]: tuple(c.strip() for c in match["clauses"].split(","))
        for match in re.finditer(r"^\| `(?P<name>\w+)` \| (?P<clauses>[^|]+) \|", section, re.M)
    }
    assert rows == {c.name: c.clauses for c in catalog.CONTRACTS}
    clauses = load_clauses()
    assert all(clause in clauses for c in catalog.CONTRACTS for clause in c.clauses)


# --- the `crosshair` Hypothesis profile (hypothesis-crosshair, in .venv-crosshair) --------


@needs_crosshair
def test_crosshair_profile_uses_the_crosshair_backend() -> None:
    from harness import profiles

    assert profiles.settings_for("crosshair", "any-adapter").backend == "crosshair"


@needs_crosshair
def test_crosshair_profile_catches_a_zoo_entry() -> None:
    """A stateless property under the solver backend still fails on its zoo entry."""
    from harness.runner import Verdict, verify

    report = verify(
        "adapters.zoo.sch_budget_ignores_largest_item", "crosshair", ["sch_budget_sizing"]
    )
    assert [row.verdict for row in report.rows] == [Verdict.FAIL]


@pytest.mark.skipif(crosshair_available(), reason=WITHOUT_CROSSHAIR)
def test_crosshair_profile_without_the_backend_says_how_to_get_it() -> None:
    from harness import profiles

    with pytest.raises(ValueError, match="make crosshair-properties"):
        profiles.settings_for("crosshair", "any-adapter")


def test_cli_lists_the_contracts(capsys: pytest.CaptureFixture[str]) -> None:
    from contracts.__main__ import main

    assert main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(c.name in listed and ", ".join(c.rejects) in listed for c in catalog.CONTRACTS)


def test_cli_rejects_an_unknown_contract_and_a_bad_adapter(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from contracts.__main__ import main

    with pytest.raises(SystemExit):
        main(["--only", "nonesuch"])
    assert "no contract 'nonesuch'" in capsys.readouterr().err
    assert main(["--adapter", "adapters/zoo/nonesuch.py", "--only", "toy_token_count"]) == 2
    assert "cannot load adapter" in capsys.readouterr().err


@pytest.mark.skipif(crosshair_available(), reason=WITHOUT_CROSSHAIR)
def test_cli_without_crosshair_says_how_to_get_it(capsys: pytest.CaptureFixture[str]) -> None:
    from contracts.__main__ import main

    assert main(["--only", "fixed_token_count"]) == 2
    assert "make crosshair" in capsys.readouterr().err


@pytest.mark.skipif(crosshair_available(), reason=WITHOUT_CROSSHAIR)
def test_verify_with_the_crosshair_profile_without_the_backend_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from harness import cli

    assert cli.main(["verify", "--profile", "crosshair", "--only", "exp_toy_policy"]) == 2
    assert "make crosshair-properties" in capsys.readouterr().err

"""The exhaustive small-scope checker (docs/exhaustive.md): the reference passes, every
zoo entry within its scope is found — by the clause it breaks, or for an entry of
another component by the SYS clause its bug makes the engine break — with a shortest
path, the same one on every run; every other zoo entry is listed in the docs with the
reason it is out of scope; SPEC.md states the scopes the code searches."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exhaustive.check import COVERED, SCOPES, Exhaustive, Scopes
from exhaustive.ecm import EcmScope, EcmSpace
from exhaustive.engine import CONFIGS, DRAFTER_CONFIGS, DRAFTER_PROMPTS, EngineScope
from exhaustive.search import SearchResult, explore
from harness.cli import main
from harness.grading.grade import ItemStatus, grade
from harness.grading.rubric import load_rubric
from harness.loader import build_parts, load_adapter
from harness.runner import Verdict, verify
from harness.zoo import discover
from properties.encoder_cache_machine import encoder_cache_machine
from properties.engine_drafter_machine import DRAFTER_CLAUSES
from properties.engine_machine import SYS_CLAUSES
from properties.framework import ClauseViolation
from spec.clauses import SPEC_PATH, load_clauses

ROOT = Path(__file__).resolve().parents[1]

#: Small scopes that still contain each bug (the default scope contains them all).
ECM_SMALL = Scopes("test", EcmScope(capacities=(2,), sizes=(1, 2), depth=4), EngineScope())
ECM_REALLOCATED = Scopes("test", EcmScope(capacities=(2,), sizes=(1,), depth=6), EngineScope())
ENGINE_SMALL = Scopes("test", EcmScope(), EngineScope(depth=3))
ENGINE_DEPTH4 = Scopes("test", EcmScope(), EngineScope(depth=4))
#: the default depth, in the one configuration where sch_charges_cached_items shows
ENGINE_NO_PREFIX = Scopes("test", EcmScope(), EngineScope(configs=(CONFIGS[4],), depth=5))
#: the drafter's scenarios (SPEC.md "## Exhaustive scopes"), bounded and one deeper
DRAFTER_SMALL = Scopes(
    "test", EcmScope(), EngineScope(), EngineScope(DRAFTER_CONFIGS, DRAFTER_PROMPTS, depth=3)
)
DRAFTER_DEPTH4 = Scopes(
    "test", EcmScope(), EngineScope(), EngineScope(DRAFTER_CONFIGS, DRAFTER_PROMPTS, depth=4)
)

#: zoo entry -> (machine, the scope, what the search must report: a clause id, or the
#: type of the exception the implementation raises). For entries that replace another
#: component, the clause is the engine-level consequence of their bug:
FOUND: dict[str, tuple[str, Scopes, str]] = {
    "ecm_counts_entries": ("EncoderCacheMachine", ECM_SMALL, "ECM-1"),
    "ecm_evicts_one_extra": ("EncoderCacheMachine", ECM_SMALL, "ECM-5"),
    "ecm_evicts_one_short": ("EncoderCacheMachine", ECM_SMALL, "ECM-5"),
    "ecm_evicts_referenced": ("EncoderCacheMachine", ECM_SMALL, "ECM-5"),
    "ecm_exact_budget_refused": ("EncoderCacheMachine", ECM_SMALL, "ECM-4"),
    "ecm_newest_first_eviction": ("EncoderCacheMachine", ECM_SMALL, "ECM-5"),
    "ecm_release_at_first_use": ("EncoderCacheMachine", ECM_SMALL, "ECM-6"),
    "ecm_keeps_released_request": ("EncoderCacheMachine", ECM_SMALL, "ECM-8"),
    "ecm_reset_keeps_references": ("EncoderCacheMachine", ECM_SMALL, "ECM-9"),
    "ecm_reports_reallocated_freed": ("EncoderCacheMachine", ECM_REALLOCATED, "ECM-7"),
    "sys_admits_unfittable": ("EngineMachine", ENGINE_SMALL, "SYS-9"),
    "sys_frees_refs_before_consumption": ("EngineMachine", ENGINE_SMALL, "SYS-1"),
    "sys_ignores_encoder_budget": ("EngineMachine", ENGINE_SMALL, "SYS-4"),
    "sys_no_prefix_image_keys": ("EngineMachine", ENGINE_SMALL, "SYS-6"),
    "sys_preempt_keeps_refs": ("EngineMachine", ENGINE_SMALL, "SYS-7"),
    "sys_preempt_discards_outputs": ("EngineMachine", ENGINE_SMALL, "SYS-10"),
    # add, step (the first token), preempt, step (the prompt again, then a sample)
    "sys_preempt_skips_output_kv": ("EngineMachine", ENGINE_DEPTH4, "SYS-10"),
    "sys_reencodes_held": ("EngineMachine", ENGINE_SMALL, "SYS-3"),
    "sys_skips_worker_drop": ("EngineMachine", ENGINE_SMALL, "SYS-5"),
    "sys_waiting_keeps_refs": ("EngineMachine", ENGINE_SMALL, "SYS-7"),
    # blocks hashed without (or with the wrong) image keys: another image's KV is reused
    "pfx_ignores_image": ("EngineMachine", ENGINE_SMALL, "SYS-6"),
    "pfx_key_by_size": ("EngineMachine", ENGINE_SMALL, "SYS-6"),
    # hits charged to the budget drive it below zero: the cache manager rejects the
    # negative budget the hook passes on
    "sch_charges_cached_items": ("EngineMachine", ENGINE_NO_PREFIX, "InvalidInputError"),
    # the unchanged budget lets a step encode more than the encoder budget
    "sch_budget_not_decremented": ("EngineMachine", ENGINE_SMALL, "SYS-4"),
    # an image exactly the encoder budget is never scheduled: no progress
    "sch_exact_budget_refused": ("EngineMachine", ENGINE_SMALL, "SYS-8"),
    # a chunk after a prefix hit inside an image reads rows nobody encoded
    "sch_no_doorstep_after_prefix_hit": ("EngineMachine", ENGINE_SMALL, "SYS-1"),
    # a chunk ends inside an image with chunked multimodal input disabled
    "sch_strict_less_disable_chunked": ("EngineMachine", ENGINE_SMALL, "SYS-10"),
    # the chunk stops one token before the image: a step without progress
    "sch_truncate_one_early": ("EngineMachine", ENGINE_SMALL, "SYS-8"),
    # the chunk reads the first row of an image it did not get encoded
    "sch_truncate_one_late": ("EngineMachine", ENGINE_SMALL, "SYS-1"),
    # the image right after the chunk is encoded although no chunk reads it
    "sch_window_one_past": ("EngineMachine", ENGINE_SMALL, "SYS-3"),
    # the same image twice in one prompt is planned twice: the cache manager rejects
    # the second allocation of a held hash
    "sch_duplicate_encoded_twice": ("EngineMachine", ENGINE_SMALL, "InvalidInputError"),
    # the popped embeddings stay accounted by the scheduler: split brain
    "worker_consumes_on_gather": ("EngineMachine", ENGINE_SMALL, "SYS-5"),
    # the break token's row is served as an embedding
    "worker_gather_ignores_is_embed": ("EngineMachine", ENGINE_SMALL, "SYS-1"),
    # freed hashes stay on the worker: split brain
    "worker_keeps_freed": ("EngineMachine", ENGINE_SMALL, "SYS-5"),
    # the caller's writes corrupt the stored rows the next chunk gathers
    "worker_returns_view": ("EngineMachine", ENGINE_SMALL, "SYS-2"),
    # with a drafter (SYS-13, SYS-14): its window not shifted; rejected drafts kept,
    # verified unverified, or not cut with a chunk the budget cuts (k = 2, depth 4);
    # the look-ahead's zero cuts of 0.22.1's doorstep and 0.33.0's rollback: no progress
    "sys_drafter_reads_target_window": ("EngineDrafterMachine", DRAFTER_SMALL, "SYS-13"),
    "sys_rejected_drafts_kept": ("EngineDrafterMachine", DRAFTER_SMALL, "SYS-14"),
    "sys_every_draft_accepted": ("EngineDrafterMachine", DRAFTER_SMALL, "SYS-6"),
    "sys_draft_count_not_trimmed": ("EngineDrafterMachine", DRAFTER_DEPTH4, "SYS-14"),
    "sch_lookahead_doorstep_to_zero": ("EngineDrafterMachine", DRAFTER_SMALL, "SYS-8"),
    "sch_rollback_cuts_previous_image": ("EngineDrafterMachine", DRAFTER_SMALL, "SYS-8"),
}


def search(adapter: str, machine: str, scopes: Scopes) -> tuple[SearchResult, Verdict]:
    exhaustive = Exhaustive(scopes)
    report = verify(adapter, "ci", [machine], transform=exhaustive.transform)
    return exhaustive.results[machine], report.results[machine].verdict


def path_of(result: SearchResult) -> list[tuple[str, tuple[str, ...]]]:
    assert result.violation is not None
    return [(step.label, step.notes) for step in result.violation.path]


def test_the_reference_passes_the_bounded_scopes() -> None:
    exhaustive = Exhaustive(SCOPES["bounded"])
    report = verify("reference", "ci", list(COVERED), transform=exhaustive.transform)
    for name in COVERED:
        result = exhaustive.results[name]
        assert result.violation is None, name
        assert result.states > 100 and result.transitions > result.states, name
        # every transition SPEC.md declares is reached within the scope (else VACUOUS)
        assert report.results[name].verdict is Verdict.PASS, report.results[name].detail
        assert report.results[name].examples == result.states


@pytest.mark.parametrize("entry", sorted(FOUND))
def test_every_zoo_entry_in_scope_is_found_with_a_shortest_path(entry: str) -> None:
    machine, scopes, expected = FOUND[entry]
    first, verdict = search(f"adapters.zoo.{entry}", machine, scopes)
    violation = first.violation
    assert violation is not None, f"{entry}: no violation within {scopes.name} scope"
    error = violation.error
    found = error.clause if isinstance(error, ClauseViolation) else type(error).__name__
    assert found == expected, f"{entry}: {found}: {error}"
    assert verdict is (Verdict.FAIL if expected.startswith(("ECM", "SYS")) else Verdict.ERROR)
    assert violation.path and all(step.label for step in violation.path)
    # deterministic: the same path, step by step, narration included
    again, _ = search(f"adapters.zoo.{entry}", machine, scopes)
    assert path_of(again) == path_of(first)
    assert again.states == first.states and again.transitions == first.transitions


def test_the_path_is_a_shortest_one() -> None:
    """No shorter sequence violates anything: the search one level shallower is clean."""
    adapter = "adapters.zoo.ecm_evicts_referenced"
    result, _ = search(adapter, "EncoderCacheMachine", ECM_SMALL)
    assert result.violation is not None
    length = len(result.violation.path)
    assert length >= 2
    shallower = Scopes("test", EcmScope(capacities=(2,), sizes=(1, 2), depth=length - 1))
    clean, verdict = search(adapter, "EncoderCacheMachine", shallower)
    # (a shallow scope may miss a declared transition: VACUOUS, but never FAIL)
    assert clean.violation is None and verdict is not Verdict.FAIL


def test_copying_and_replaying_explore_the_same_states() -> None:
    """Deep-copied states are the states a replay from scratch reaches."""
    reference = load_adapter("reference").adapter
    runnable = encoder_cache_machine(build_parts(reference, reference))
    assert runnable.machine_class is not None
    scope = EcmScope(capacities=(2,), sizes=(1, 2), depth=3)
    spaces = [EcmSpace(runnable.machine_class, s) for s in scope.scenarios()]
    copied = explore(spaces, scope.depth, "copy")
    replayed = explore(spaces, scope.depth, "replay")
    assert copied.violation is None and replayed.violation is None
    assert copied.per_space == replayed.per_space
    assert copied.transitions == replayed.transitions


def test_a_violation_prints_its_shortest_path_as_numbered_steps() -> None:
    exhaustive = Exhaustive(ENGINE_SMALL)
    report = verify(
        "adapters.zoo.sys_preempt_keeps_refs", "ci", ["EngineMachine"],
        transform=exhaustive.transform,
    )
    failure = report.results["EngineMachine"].failures[0]
    assert failure.clause == "SYS-7"
    numbered = [line for line in failure.counterexample if re.match(r"\d+\. ", line)]
    length = len(path_of(exhaustive.results["EngineMachine"]))
    assert [line.split(".")[0] for line in numbered] == [str(k) for k in range(1, length + 1)]
    assert any(line.startswith("scenario: ") for line in failure.counterexample)


def test_every_other_zoo_entry_is_listed_out_of_scope_with_a_reason() -> None:
    docs = (ROOT / "docs" / "exhaustive.md").read_text(encoding="utf-8")
    text = docs.split("## Zoo entries outside the scopes", 1)[1]
    outside = dict(re.findall(r"^\| `(\w+)` \| [^|]+ \| (.+?) \|$", text, re.MULTILINE))
    names = {entry.short_name for entry in discover()}
    assert set(FOUND) | set(outside) == names, sorted(names - set(FOUND) - set(outside))
    assert not set(FOUND) & set(outside)
    assert all(len(reason) > 20 for reason in outside.values())


def test_spec_names_the_exhaustive_checker_and_states_the_scopes() -> None:
    """Each ECM clause and each SYS clause of ``EngineMachine`` names the exhaustive
    checker in its "Checked by", no other clause does (SYS-11/12: resets and weight
    updates are not operations of the searched scope), and SPEC.md's depths are the
    code's."""
    text = SPEC_PATH.read_text(encoding="utf-8")
    checked_by = dict(
        re.findall(r"^### ([A-Z]+-\d+) — .*?^- \*\*Checked by:\*\* (.*?)$", text, re.M | re.S)
    )
    assert set(checked_by) == set(load_clauses())
    for clause_id, line in checked_by.items():
        machine = {"ECM": "EncoderCacheMachine", "SYS": "EngineMachine"}.get(
            clause_id.split("-")[0]
        )
        if machine == "EngineMachine" and clause_id not in SYS_CLAUSES:
            machine = "EngineDrafterMachine" if clause_id in DRAFTER_CLAUSES else None
        if machine is None:
            assert "exhaustive" not in line, clause_id
        else:
            assert f"exhaustive: {machine} by breadth-first search" in line, clause_id
    section = text.split("## Exhaustive scopes", 1)[1].split("\n## ", 1)[0]
    ecm, engine = section.split("- **Engine loop", 1)
    engine, drafter = engine.split("- **Engine loop with a drafter", 1)
    assert f"up to {SCOPES['default'].drafter.depth} operations" in drafter
    assert f"up to {SCOPES['bounded'].drafter.depth} operations" in drafter
    assert f"up to {EcmScope().depth} operations" in ecm
    assert f"up to {SCOPES['bounded'].ecm.depth} operations" in ecm
    assert f"up to {EngineScope().depth} operations" in engine
    assert f"up to {SCOPES['bounded'].engine.depth} operations" in engine
    assert f"Up to {EngineScope().max_requests} requests" in engine


def test_grading_mode_judges_the_machine_clauses_by_the_search() -> None:
    """``grade --exhaustive``: the item of the broken clause fails with the shortest path
    as its steps, the same on every run; the reference passes those items."""
    rubric = load_rubric()
    entry = "adapters/zoo/ecm_evicts_referenced.py"
    reports = [
        grade(entry, rubric, "ci", only=["ECM-5"], exhaustive=Exhaustive(ECM_SMALL))
        for _ in range(2)
    ]
    (home,) = [r for r in reports[0].items if "ECM-5" in r.item.clauses]
    assert home.status is ItemStatus.FAILED
    failure = next(f for f in home.failures if f.clause == "ECM-5")
    numbered = [s for s in failure.steps if re.match(r"\d+\. ", s)]
    assert numbered[0].startswith("1. ") and len(numbered) >= 2
    assert "--exhaustive test" in failure.replay_command
    assert "exhaustive search" in failure.reproducer_note
    again = next(
        f for r in reports[1].items for f in r.failures if f.clause == "ECM-5"
    )
    assert again.steps == failure.steps
    reference = grade("reference", rubric, "ci", only=["ECM-5"], exhaustive=Exhaustive(ECM_SMALL))
    assert all(r.status is ItemStatus.PASSED for r in reference.items if r.properties), [
        (r.item.number, r.status, r.summary) for r in reference.items
    ]


def test_the_command_line_prints_the_scope_the_states_and_the_path(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["verify", "--exhaustive", "bounded", "--only", "EngineMachine"]
    code = main([*argv, "--adapter", "adapters.zoo.sys_admits_unfittable"])
    out = capsys.readouterr().out
    assert code == 1
    assert "EngineMachine: bounded scope: engine loop: configurations" in out
    assert re.search(r"6 scenarios, \d+ distinct states, \d+ transitions", out)
    assert "violation of SYS-9 after 1 operation " in out
    assert "  1. add r1: [X], 1 to generate" in out
    assert "--only EngineMachine --exhaustive bounded" in out
    assert main(argv) == 0  # the reference


def _table_header(out: str) -> list[str]:
    return next(line for line in out.splitlines() if line.startswith("clause ")).split()


def test_the_report_counts_the_searched_machines_in_states_not_examples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # issue 33, item 9: an exhaustive search explores states; the table says so
    assert main(["verify", "--exhaustive", "bounded", "--only", "EngineMachine"]) == 0
    out = capsys.readouterr().out
    states = re.search(r"(\d+) distinct states", out)
    assert states is not None, out
    assert _table_header(out) == ["clause", "property", "states", "verdict", "implementation"]
    rows = [line.split() for line in out.splitlines() if line.startswith("SYS-")]
    assert rows and all(row[1:3] == ["EngineMachine", states.group(1)] for row in rows), rows
    # beside a property run by Hypothesis, the column counts examples and the machine's
    # rows say that theirs are states
    only = ["--only", "EngineMachine", "hash_same_length_different_bytes"]
    assert main(["verify", "--exhaustive", "bounded", *only]) == 0
    out = capsys.readouterr().out
    assert _table_header(out)[2] == "examples"
    machine = [line for line in out.splitlines() if " EngineMachine " in f" {line} "]
    hashing = [line for line in out.splitlines() if line.startswith("HASH-2 ")]
    assert machine and all(f" {states.group(1)} states " in line for line in machine), machine
    assert hashing and "states" not in hashing[0], hashing


def test_the_full_scope_is_the_default_scenarios_to_depth_eight() -> None:
    full, default = SCOPES["full"], SCOPES["default"]
    assert full.ecm.depth == 8
    assert full.ecm.scenarios() == default.ecm.scenarios()
    assert full.ecm.capacities == (1, 2, 3, 4, 5, 6) and full.ecm.sizes == (1, 2, 3)
    assert full.engine == default.engine and full.drafter == default.drafter


"""The kill matrix judges honestly, and the zoo holds the mistakes issue 7 names.

The matrix itself runs as its own step of ``make test`` (``python -m
harness.kill_matrix``, which fails on a surviving entry, an entry killed only by an
exception, or a property that kills nothing); these tests check its judging and
rendering on synthetic rows, one real row, and that ``make test`` runs it.
"""

from __future__ import annotations

import re

from harness.catalog import registered_properties
from harness.kill_matrix import (
    KILLED_BY_OTHER,
    KILLED_BY_OWN,
    Row,
    column_labels,
    exercising,
    judge,
    render,
    run_entry,
)
from harness.zoo import ZooEntry, catalogue, discover
from tests.conftest import ROOT

#: Issue 7's list of real mistakes, each with the zoo entries that make it.
ISSUE_MISTAKES: dict[str, tuple[str, ...]] = {
    "off-by-one in token counts": ("exp_fixed_counts_cls", "exp_keeps_marker"),
    "off-by-one in offsets": ("exp_off_by_one_offset",),
    "// vs ceiling in patch counts": ("exp_toy_ceil", "exp_pixtral_floor"),
    "hashing by length": ("hash_by_length",),
    "hashing by object identity": ("hash_by_identity", "pfx_key_by_identity"),
    "hashing without dtype": ("hash_no_dtype",),
    "hashing without shape": ("hash_no_shape",),
    "counting entries instead of embeddings": ("ecm_counts_entries",),
    "FIFO eviction of referenced entries (seed 004)": ("ecm_evicts_referenced",),
    "newest-first eviction": ("ecm_newest_first_eviction",),
    "charging budget for cached items": ("sch_charges_cached_items",),
    "encoding only the consumed part of an image": ("sch_encodes_only_consumed_part",),
    "truncating one token early": ("sch_truncate_one_early",),
    "truncating one token late": ("sch_truncate_one_late",),
    "a chunk ending inside an item with disable_chunked_mm_input": (
        "sch_strict_less_disable_chunked",
    ),
    "an item exactly the size of the budget refused": (
        "sch_exact_budget_refused",
        "ecm_exact_budget_refused",
    ),
    "eviction stopping one entry late": ("ecm_evicts_one_extra",),
    "eviction stopping one entry early": ("ecm_evicts_one_short",),
    "the same hash with a different embed count accepted": ("ecm_accepts_count_mismatch",),
    "a single row broadcast by the splice": ("spl_broadcast_single_row",),
    "an empty embedding list accepted": ("spl_empty_list_noop",),
    "the torch naive parts (seed 004)": (
        "torch_fifo_eviction",
        "torch_out_of_order_batch",
        "torch_shared_marker_tensor",
    ),
}


def test_the_zoo_holds_every_mistake_the_issue_names() -> None:
    names = {e.short_name for e in discover()}
    assert len(names) >= 25
    for mistake, entries in ISSUE_MISTAKES.items():
        absent = [e for e in entries if e not in names]
        assert not absent, f"{mistake}: no zoo entry {absent}"


def test_the_catalogue_is_current() -> None:
    written = (ROOT / "docs" / "zoo.md").read_text(encoding="utf-8")
    assert written == catalogue(discover()), "regenerate: python -m harness.zoo > docs/zoo.md"


def test_make_test_prints_the_kill_matrix() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    target = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert target, "the Makefile has no test target"
    assert "-m harness.kill_matrix" in target.group(1)


def _entry(name: str, components: tuple[str, ...], killed_by: str) -> ZooEntry:
    return ZooEntry(f"adapters.zoo.{name}", "X-1", killed_by, "typical student error: x",
                    components)


def test_exercising_follows_subject_and_uses() -> None:
    registry = registered_properties()
    hook_bug = _entry("hook", ("scheduling_hook",), "sch_doorstep_truncation")
    selected = exercising(hook_bug, registry)
    assert "sch_doorstep_truncation" in selected
    assert "EngineMachine" in selected  # a subject of the composite engine machine
    assert not any(n.startswith(("exp_", "spl_", "hash_")) for n in selected)
    processor_bug = _entry("proc", ("processor",), "exp_total_length")
    # the injection property *uses* a processor to build the expanded side
    assert "spl_injection_commutes" in exercising(processor_bug, registry)


def test_judge_flags_survivors_exception_only_kills_and_idle_properties() -> None:
    registry = registered_properties()
    names = list(registry)
    first, second = names[0], names[1]
    rows = [
        Row(_entry("own", ("splice",), first), {first: KILLED_BY_OWN, second: "."}),
        Row(_entry("other", ("splice",), second), {first: KILLED_BY_OTHER, second: "."}),
        Row(_entry("crash", ("splice",), first), {first: "E", second: "."}),
        Row(_entry("blind", ("splice",), first), {first: ".", second: "V"}),
    ]
    verdicts = judge(rows, registry)
    assert not verdicts.ok
    problems = "\n".join(verdicts.problems)
    assert "own:" not in problems
    assert f"other: its KILLED_BY {second} does not kill it (.)" in problems
    assert "crash: killed only by an exception" in problems
    assert "blind: survived" in problems
    assert f"{second} kills no zoo entry" in problems
    assert f"{first} kills no zoo entry" not in problems
    assert verdicts.kills_by_property[first] == 2


def test_column_labels_are_unique_and_short() -> None:
    registry = registered_properties()
    labels = column_labels(registry)
    assert len(set(labels.values())) == len(labels)
    assert labels["EncoderCacheMachine"] == "ECM*"
    assert labels["EngineMachine"] == "SYS*"
    assert labels["EngineResetMachine"] == "SYS*R"
    assert labels["EngineDrafterMachine"] == "SYS*D"
    assert labels["spl_text_rows_untouched"] == "SPL-1"
    assert {labels["exp_marker_mismatch_rejected"], labels["exp_bad_input_rejected"]} == {
        "EXP-4a",
        "EXP-4b",
    }


def test_a_real_row_and_its_rendering() -> None:
    registry = registered_properties()
    entry = next(e for e in discover() if e.short_name == "spl_empty_list_noop")
    row = run_entry(entry)
    assert row.cells[entry.killed_by] == KILLED_BY_OWN
    assert set(row.cells) == set(exercising(entry, registry))
    assert row.outcome == "killed"
    text = render([row], [], registry, judge([row], registry), 1.0)
    table = text.splitlines()
    header = next(line for line in table if line.startswith("splice"))
    line = next(line for line in table if line.startswith("spl_empty_list_noop"))
    # the K sits under its column's label
    assert line[header.index("SPL-4")] == KILLED_BY_OWN


def test_the_cost_benchmark_times_the_cells_the_matrix_marks() -> None:
    """benchmarks/kill_matrix_cost.py marks each cell as the matrix does (one
    ``cell_mark``), and its makespan is a process pool's: in order, to whichever worker
    frees first."""
    from benchmarks import kill_matrix_cost

    entry = next(e for e in discover() if e.short_name == "hash_no_shape")
    timed = kill_matrix_cost.timed_row(entry)
    assert {name: mark for _, name, mark, _ in timed} == run_entry(entry).cells
    assert all(seconds >= 0 for *_, seconds in timed)
    assert kill_matrix_cost.makespan([3.0, 1.0, 1.0, 1.0], 2) == 3.0
    assert kill_matrix_cost.makespan([1.0, 1.0, 3.0], 2) == 4.0
    assert kill_matrix_cost.makespan([3.0, 1.0, 1.0], 1) == 5.0

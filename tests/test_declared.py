"""Finding classes of the pinned vLLM releases (issue 14): a defect that stands, or a row
that differs from the declaration, makes `verify --vllm VERSION` fail; hazards alone do
not (harness/declared.py)."""

from __future__ import annotations

import dataclasses

import pytest

from harness.declared import (
    CLASSES,
    DEFAULT_VARIANT,
    DeclarationError,
    active_variant,
    judge,
    load_declaration,
    release_of,
    variant_environment,
)
from harness.runner import ClauseRow, Report, Verdict


def report_with(rows: list[tuple[str, str, str]], name: str = "vllm 0.33.0 (tree x)") -> Report:
    return Report(
        adapter_ref="adapters/vllm",
        adapter_name=name,
        identity="vllm",
        profile="ci",
        provenance={},
        rows=tuple(ClauseRow(c, p, 1, Verdict(v), "vllm") for c, p, v in rows),
        results={},
        clauses={},
    )


def declared_rows(version: str) -> list[tuple[str, str, str]]:
    declaration = load_declaration(version)
    assert declaration is not None
    return [(c, p, v) for (c, p), (v, _) in declaration.rows.items()]


def test_every_declared_finding_has_a_class() -> None:
    for version in ("0.22.1", "0.33.0"):
        declaration = load_declaration(version)
        assert declaration is not None
        assert {c for c, _ in declaration.findings.values()} <= set(CLASSES)
        assert all(why for _, why in declaration.findings.values())


def test_a_standing_defect_fails_and_hazards_alone_pass() -> None:
    declaration = load_declaration("0.33.0")
    assert declaration is not None
    as_declared = declared_rows("0.33.0") + [("EXP-1", "exp_total_length", "pass")]
    lines, clean = judge(report_with(as_declared), declaration)
    assert not clean and lines[-1] == "verdict: defects stand"
    assert any(line.startswith("  V12 SCH-6") for line in lines)
    # a release whose only findings are hazards (0.33.0 without its defects) is clean
    defects = {f for f, (kind, _) in declaration.findings.items() if kind == "defect"}
    hazards_only = dataclasses.replace(
        declaration, rows={k: v for k, v in declaration.rows.items() if v[1] not in defects}
    )
    defect_rows = {c for (c, _), (_, f) in declaration.rows.items() if f in defects}
    fixed = [(c, p, "pass" if c in defect_rows else v) for c, p, v in as_declared]
    lines, clean = judge(report_with(fixed), hazards_only)
    assert clean and lines[-1] == "verdict: clean (hazards only)"
    assert "hazards: 9 rows" in lines and "defects: 0 rows" in lines  # V25 is the ninth
    # but a declared finding that stops failing differs from the declaration: red
    lines, clean = judge(report_with(fixed), declaration)
    assert not clean and lines[-1] == "verdict: differs from the declaration"


def test_a_row_that_differs_fails() -> None:
    declaration = load_declaration("0.33.0")
    assert declaration is not None
    defect_rows = ("SCH-6", "HASH-5")
    rows = [(c, p, "pass" if c in defect_rows else v) for c, p, v in declared_rows("0.33.0")]
    rows.append(("ECM-5", "EncoderCacheMachine", "FAIL"))
    lines, clean = judge(report_with(rows), declaration)
    assert not clean and "  NEW FAIL: ECM-5 EncoderCacheMachine" in lines
    missing = [r for r in rows if r[0] != "HASH-4"]
    lines, clean = judge(report_with(missing), declaration)
    assert not clean and any("HASH-4 hash_structure_framed: declared FAIL" in x for x in lines)
    assert judge(report_with(missing), declaration, partial=True)[1] is False  # V12's row


def test_the_release_is_read_from_the_adapter_name() -> None:
    assert release_of(report_with([], "vllm 0.33.0 (source tree /x)")) == "0.33.0"
    assert release_of(report_with([], "vllm 0.33.1.dev5+gabc (source tree /x)")) is None
    assert release_of(report_with([], "reference")) is None


def test_a_processor_cache_variant_replaces_its_properties_rows_and_no_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MMSPEC_VLLM_PROCESSOR_CACHE=shm: the declaration's ItemCacheMachine rows are the
    variant's (V31), every other row the release's; a variant no file declares is refused
    in one line."""
    for version in ("0.22.1", "0.33.0"):
        default = load_declaration(version, DEFAULT_VARIANT)
        shm = load_declaration(version, "shm")
        assert default is not None and shm is not None
        fic = {k: v for k, v in shm.rows.items() if k[1] == "ItemCacheMachine"}
        assert fic == {
            ("FIC-3", "ItemCacheMachine"): ("blocked", "V31"),
            ("FIC-4", "ItemCacheMachine"): ("FAIL", "V31"),
        }
        others = {k: v for k, v in default.rows.items() if k[1] != "ItemCacheMachine"}
        assert {k: v for k, v in shm.rows.items() if k[1] != "ItemCacheMachine"} == others
        assert ("FIC-4", "ItemCacheMachine") not in default.rows  # the LRU pair passes it
    monkeypatch.setenv("MMSPEC_VLLM_PROCESSOR_CACHE", "shm")
    from_env, shm_033 = load_declaration("0.33.0"), load_declaration("0.33.0", "shm")
    assert from_env is not None and shm_033 is not None and from_env.rows == shm_033.rows
    with pytest.raises(DeclarationError, match="no variable selects a variant named 'foo'"):
        load_declaration("0.33.0", "foo")


#: 0.33.0's findings in its Scheduler, the same on model runner V2 as on V1.
_V2_SCHEDULER_ROWS = {
    ("SYS-8", "EngineHybridMachine"): ("FAIL", "V30"),
    ("SYS-7", "EngineDrafterMachine"): ("FAIL", "V21"),
    ("SYS-8", "EngineDrafterMachine"): ("FAIL", "V23"),
    ("SYS-10", "EngineDrafterMachine"): ("FAIL", "V12"),
    ("SYS-7", "EngineAsyncDrafterMachine"): ("FAIL", "V21"),
    ("SYS-8", "EngineAsyncDrafterMachine"): ("FAIL", "V23"),
    ("SYS-10", "EngineAsyncDrafterMachine"): ("FAIL", "V12"),
}


def test_the_model_runner_variant_replaces_the_worker_store_rows_and_no_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MMSPEC_VLLM_MODEL_RUNNER=v2: the WRK properties' rows are V2's (V25 on both
    releases, as on V1's runner), every other row the release's; the variable names the
    variant, and two variants at once are refused."""
    wrk = {"wrk_free_before_store", "wrk_freed_hash_dropped", "wrk_gather_selects_embed_rows",
           "wrk_chunks_concatenate_to_whole", "wrk_miss_is_an_error"}
    engine = {"EngineMachine", "EngineResetMachine", "EngineHybridMachine",
              "EngineDrafterMachine", "EngineAsyncMachine",
              "EngineAsyncDrafterMachine"}  # 0.33.0 only
    for version in ("0.22.1", "0.33.0"):
        replaced = wrk | engine if version == "0.33.0" else wrk
        default = load_declaration(version, DEFAULT_VARIANT)
        v2 = load_declaration(version, "v2")
        assert default is not None and v2 is not None
        assert {k: v for k, v in v2.rows.items() if k[1] in replaced} == {
            ("WRK-5", "wrk_miss_is_an_error"): ("FAIL", "V25"),  # V27 does not occur on V2
            **(_V2_SCHEDULER_ROWS if version == "0.33.0" else {}),
        }
        others = {k: v for k, v in default.rows.items() if k[1] not in replaced}
        assert {k: v for k, v in v2.rows.items() if k[1] not in replaced} == others
    assert ("SYS-1", "EngineResetMachine") in load_declaration("0.33.0", DEFAULT_VARIANT).rows
    assert variant_environment("v2") == {"MMSPEC_VLLM_MODEL_RUNNER": "v2"}
    assert variant_environment("shm") == {"MMSPEC_VLLM_PROCESSOR_CACHE": "shm"}
    assert variant_environment(DEFAULT_VARIANT) == {}
    monkeypatch.setenv("MMSPEC_VLLM_MODEL_RUNNER", "v2")
    assert active_variant() == "v2"
    monkeypatch.setenv("MMSPEC_VLLM_PROCESSOR_CACHE", "lru")  # a default: still v2
    assert active_variant() == "v2"
    monkeypatch.setenv("MMSPEC_VLLM_PROCESSOR_CACHE", "shm")
    with pytest.raises(DeclarationError, match="one variant at a time"):
        active_variant()

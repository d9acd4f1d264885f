"""The state machines as a library (harness/machines.py, issue 21): a factory in, a
``RuleBasedStateMachine`` out whose ``TestCase`` a third party's pytest collects."""

from __future__ import annotations

import unittest
from typing import Any

import pytest
from hypothesis import settings

from adapters.zoo.ecm_newest_first_eviction import NewestFirstEviction
from harness.machines import (
    encoder_cache,
    engine,
    engine_async,
    engine_async_drafter,
    engine_drafter,
    engine_hybrid,
    engine_resets,
)
from properties.framework import ClauseViolation
from reference.encoder_cache import EncoderCacheManager
from reference.engine import EngineLoop
from spec.adapter import EngineParts
from spec.types import EngineConfig

FAST = settings(max_examples=30, stateful_step_count=20, deadline=None, database=None,
                derandomize=True)


def _violated(machine: Any) -> ClauseViolation:
    """The clause violation the machine raises (it must raise one)."""
    machine.TestCase.settings = settings(max_examples=200, deadline=None, database=None,
                                         derandomize=True)
    with pytest.raises(ClauseViolation) as raised:
        machine.TestCase("runTest").runTest()
    return raised.value


def _run(machine: type) -> unittest.TestResult:
    case = machine.TestCase
    case.settings = FAST
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(case)
    result = unittest.TestResult()
    suite.run(result)
    return result


def test_the_reference_cache_passes_its_machine() -> None:
    result = _run(encoder_cache(EncoderCacheManager, reset=True, bookkeeping=True))
    assert result.wasSuccessful(), result.failures + result.errors


def test_a_violation_raises_an_error_naming_its_clause() -> None:
    error = _violated(encoder_cache(NewestFirstEviction))
    assert error.clause == "ECM-5"
    assert type(error).__name__ == "ClauseViolation[ECM-5]"


def test_capabilities_are_explicit_flags() -> None:
    class NoReset(EncoderCacheManager):
        reset = None  # type: ignore[assignment]

    with pytest.raises(TypeError, match=r"reset=True, but .* does not provide reset\(\)"):
        encoder_cache(NoReset, reset=True)
    hidden = encoder_cache(EncoderCacheManager, reset=False, bookkeeping=False)
    assert _run(hidden).wasSuccessful()


def test_the_engine_machine_takes_an_engine_loop_factory() -> None:
    result = _run(engine(EngineLoop))
    assert result.wasSuccessful(), result.failures + result.errors
    with pytest.raises(TypeError, match="not components of the engine: splice"):
        engine(EngineLoop, splice=object)


def test_the_reset_machine_takes_an_engine_with_resets_or_updates() -> None:
    """SYS-11/12 as a library: the reference passes; an update that lets the running
    requests go on raises SYS-12's violation; an engine with neither is refused."""
    from adapters.zoo.sys_update_keeps_running import UpdateKeepsRunning

    result = _run(engine_resets(EngineLoop))
    assert result.wasSuccessful(), result.failures + result.errors
    assert _violated(engine_resets(UpdateKeepsRunning)).clause == "SYS-12"

    class Plain(EngineLoop):
        reset_encoder_cache = None  # type: ignore[assignment]
        update_weights = None  # type: ignore[assignment]

    with pytest.raises(TypeError, match="needs resets or weight updates"):
        engine_resets(Plain)


def test_the_drafter_machine_takes_an_engine_with_a_drafter() -> None:
    """SYS-13 as a library: the reference passes; a drafter served the target's window
    raises SYS-13's violation; an engine without a drafter is refused."""
    from adapters.zoo.sys_drafter_reads_target_window import DrafterReadsTargetWindow

    result = _run(engine_drafter(EngineLoop))
    assert result.wasSuccessful(), result.failures + result.errors
    assert _violated(engine_drafter(DrafterReadsTargetWindow)).clause == "SYS-13"

    class NoDrafter(EngineLoop):
        num_speculative_tokens = None  # type: ignore[assignment]

    with pytest.raises(TypeError, match="needs a drafter"):
        engine_drafter(NoDrafter)


def test_the_async_machine_takes_an_engine_that_schedules_ahead() -> None:
    """SYS-15 as a library: the reference passes; a batch queue used as a stack raises
    SYS-15's violation; an engine without async scheduling is refused."""
    from adapters.zoo.sys_async_newest_batch_first import NewestBatchFirst

    result = _run(engine_async(EngineLoop))
    assert result.wasSuccessful(), result.failures + result.errors
    assert _violated(engine_async(NewestBatchFirst)).clause == "SYS-15"

    class Synchronous(EngineLoop):
        async_scheduling = None  # type: ignore[assignment]

    with pytest.raises(TypeError, match="needs async scheduling"):
        engine_async(Synchronous)


def test_the_async_drafter_machine_takes_an_engine_with_both_modes() -> None:
    """SYS-13..15 together as a library: the reference passes; a runner that keeps the
    optimistic start after rejected drafts raises SYS-10's violation; an engine that
    refuses the pair is refused."""
    from adapters.zoo.sys_async_draft_start_uncorrected import DraftStartUncorrected
    from spec.errors import InvalidInputError

    result = _run(engine_async_drafter(EngineLoop))
    assert result.wasSuccessful(), result.failures + result.errors
    assert _violated(engine_async_drafter(DraftStartUncorrected)).clause == "SYS-10"

    class RefusesThePair(EngineLoop):
        def __init__(self, config: EngineConfig, parts: EngineParts) -> None:
            if config.async_scheduling and config.num_speculative_tokens:
                raise InvalidInputError("async scheduling with a drafter: not supported")
            super().__init__(config, parts)

    with pytest.raises(TypeError, match="refuses async scheduling with a drafter"):
        engine_async_drafter(RefusesThePair)


def test_the_item_cache_machine_takes_a_pair_factory() -> None:
    """FIC-1..3 as a library: the reference pair passes, vLLM 0.22.1's stale receiver
    (zoo fic_stale_entry_wins) raises FIC-1's violation."""
    from adapters.zoo.fic_stale_entry_wins import StaleWinsItemCache
    from harness.machines import item_cache
    from reference.item_cache import ItemCache

    result = _run(item_cache(ItemCache))
    assert result.wasSuccessful(), result.failures + result.errors
    machine = item_cache(StaleWinsItemCache)
    machine.TestCase.settings = settings(max_examples=1000, deadline=None, database=None,
                                         derandomize=True)
    with pytest.raises(ClauseViolation) as raised:
        machine.TestCase("runTest").runTest()
    assert raised.value.clause == "FIC-1"


def test_the_embedding_cache_machine_takes_a_cache_factory() -> None:
    """EMB-1/EMB-2 as a library: the reference cache passes, SGLang 0.5.22's rule (zoo
    emb_oversized_evicts_all: an embedding larger than the cache empties it before it is
    refused) raises EMB-2's violation."""
    from adapters.zoo.emb_oversized_evicts_all import EvictsAllCache
    from harness.machines import embedding_cache
    from reference.embedding_cache import EmbeddingCache

    result = _run(embedding_cache(EmbeddingCache))
    assert result.wasSuccessful(), result.failures + result.errors
    machine = embedding_cache(EvictsAllCache)
    machine.TestCase.settings = settings(max_examples=1000, deadline=None, database=None,
                                         derandomize=True)
    with pytest.raises(ClauseViolation) as raised:
        machine.TestCase("runTest").runTest()
    assert raised.value.clause == "EMB-2"


def test_the_hybrid_machine_takes_an_engine_that_serves_hybrid_models() -> None:
    """SYS-16 as a library: the reference passes; resuming at any cached block (no state
    written there) raises SYS-16's violation; an engine without hybrid models, or one
    that says it is not aligned, is refused."""
    from adapters.zoo.sys_mamba_hit_without_state import HitWithoutState

    result = _run(engine_hybrid(EngineLoop))
    assert result.wasSuccessful(), result.failures + result.errors
    assert _violated(engine_hybrid(HitWithoutState)).clause == "SYS-16"

    class AttentionOnly(EngineLoop):
        mamba_block_aligned = None  # type: ignore[assignment]

    class SaysUnaligned(EngineLoop):
        def mamba_block_aligned(self) -> bool:
            return False

    with pytest.raises(TypeError, match="needs a hybrid-model engine"):
        engine_hybrid(AttentionOnly)
    with pytest.raises(TypeError, match="the engine says False"):
        engine_hybrid(SaysUnaligned)


def test_mmspec_settings_are_the_command_lines_for_each_machine() -> None:
    """Issue 33, item 8: the machines run under the caller's settings (Hypothesis' default:
    100 programs), half what ``verify`` runs; ``mmspec_settings`` gives them the command
    line's: the profile's settings with each machine's programs as the registry counts them
    (the profile's ``max_examples``, at least the machine's floor)."""
    from harness.loader import build_parts, load_adapter
    from harness.machines import item_cache, mmspec_settings
    from harness.profiles import profile_settings
    from properties.framework import REGISTRY
    from reference.item_cache import ItemCache

    parts = build_parts(load_adapter("reference").adapter, None)
    floor = {}
    for spec in REGISTRY.values():
        runnable = spec.build(parts)
        if runnable.machine_name is not None:
            floor[runnable.machine_name] = runnable.min_programs
    made = [
        encoder_cache(EncoderCacheManager), item_cache(ItemCache), engine(EngineLoop),
        engine_resets(EngineLoop), engine_drafter(EngineLoop), engine_async(EngineLoop),
        engine_async_drafter(EngineLoop), engine_hybrid(EngineLoop),
    ]
    for profile in ("ci", "dev", "grading", "thorough"):
        base = profile_settings(profile)
        for machine in made:
            ours = mmspec_settings(machine, profile)
            expected = max(base.max_examples, floor[machine.__name__])
            assert ours.max_examples == expected, (machine, profile)
            for field in ("stateful_step_count", "derandomize", "phases", "database"):
                assert getattr(ours, field) == getattr(base, field), (machine, field)
    assert floor["EncoderCacheMachine"] == 200 and floor["ItemCacheMachine"] == 0
    assert floor["EngineMachine"] == 200
    # ``ci`` (100 examples) runs the engine machines' 200; ``grading`` (200) its own 200;
    # ``thorough`` (2000) its 2000: a floor, never a multiple of what the profile asks
    engine_settings = {p: mmspec_settings(made[2], p).max_examples for p in
                       ("ci", "grading", "thorough")}
    assert engine_settings == {"ci": 200, "grading": 200, "thorough": 2000}
    with pytest.raises(ValueError, match="not made by harness.machines"):
        mmspec_settings(type("Other", (), {}))  # type: ignore[arg-type]

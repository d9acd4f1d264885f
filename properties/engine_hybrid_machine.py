"""``EngineHybridMachine``: the engine machine serving a hybrid model (SYS-16).

``EngineMachine`` (:mod:`properties.engine_machine`) over engines built with
``EngineConfig.mamba_block_aligned``: the model has Mamba-style layers beside attention,
and their state, which exists only for the last position computed, is cached per KV
block where a chunk ends on the block's boundary (vLLM's ``mamba_cache_mode="align"``).
Every check of SYS-1..10 runs as in ``EngineMachine`` (SYS-8's bounds allow for the
chunks the alignment cuts: :meth:`properties.models.engine.EngineModel.solo_bound`),
and after each step SYS-16 checks every chunk
(:mod:`properties.engine_hybrid_invariants`): on a block boundary or at an item's
doorstep, stopped at the last boundary a prefix hit can use, and a prefix hit only where
a chunk over the same positions ended.

An engine without the capability (:class:`spec.components.HybridEngine`) runs nothing
here: every clause of this machine is not provided. A hybrid model with a drafter or
async scheduling is not specified yet (never drawn).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from hypothesis import strategies as st

from properties.engine_hybrid_invariants import (
    StateKey,
    prefill_end,
    state_key,
    sys16_ends_on_a_boundary,
    sys16_hit_on_a_cached_state,
    sys16_stops_at_the_last_hit_boundary,
)
from properties.engine_machine import (
    ENGINE_MIN_PROGRAMS,
    ENGINE_SUBJECT,
    ENGINE_USES,
    SYS_CLAUSES,
    engine_machine_class,
)
from properties.engine_strategies import RawImage, scenarios
from properties.framework import Parts, Runnable, clause_property, machine, probed_engine
from properties.models.engine import RequestFacts
from spec.components import EngineSnapshot, HybridEngine, StepOutput
from spec.types import EngineConfig

HYBRID_CLAUSES = ("SYS-16",)


def hybrid_probe(parts: Parts) -> str | None:
    """Why the engine cannot serve a hybrid model (None: it can): built with
    ``mamba_block_aligned=True``, it must say it does."""
    engine = probed_engine(parts, EngineConfig(mamba_block_aligned=True))
    aligned = getattr(engine, "mamba_block_aligned", None)
    if not isinstance(engine, HybridEngine) or not callable(aligned):
        return "the engine loop does not provide hybrid models (mamba_block_aligned(), SYS-16)"
    if aligned() is not True:
        return f"built with mamba_block_aligned=True, the engine says {aligned()!r}"
    return None


@st.composite
def hybrid_scenarios(draw: st.DrawFn) -> tuple[EngineConfig, tuple[RawImage, ...]]:
    """``EngineMachine``'s engines and images, each serving a hybrid model, with blocks
    of 2..4 tokens (a block of 1 aligns nothing)."""
    config, universe = draw(scenarios())
    if config.block_size == 1:  # more capacity per block: the KV cache still fits
        config = replace(config, block_size=draw(st.integers(2, 4), label="block_size"))
    return replace(config, mamba_block_aligned=True), universe


@dataclass(frozen=True)
class _Chunk:
    """What SYS-16 needs of one chunk, taken before the base machine moves the model."""

    facts: RequestFacts
    outputs: int
    first: bool
    output_token_ids: tuple[int, ...]
    start: int
    new: int


@clause_property(
    "EngineHybridMachine",
    (*SYS_CLAUSES, *HYBRID_CLAUSES),
    subject=ENGINE_SUBJECT,
    uses=ENGINE_USES,
    subject_any=True,
    capabilities=tuple((c, hybrid_probe) for c in (*SYS_CLAUSES, *HYBRID_CLAUSES)),
)
def engine_hybrid_machine(parts: Parts) -> Runnable:
    """SYS-1..10 and SYS-16: the engine machine serving a hybrid model (where the engine
    can; without, nothing runs: every clause of it is not provided)."""
    if hybrid_probe(parts) is not None:
        # no machine name: no transition is owed by a run that judges nothing
        return Runnable(run=lambda settings: None)
    return machine(engine_hybrid_machine_class(parts), min_programs=ENGINE_MIN_PROGRAMS)


def engine_hybrid_machine_class(parts: Parts) -> type[Any]:
    """The ``EngineHybridMachine`` class over the adapter's parts."""
    base: Any = engine_machine_class(parts, hybrid_scenarios())

    class EngineHybridMachine(base):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            #: the prefixes a chunk ended on a block boundary over: where a state was
            #: written (a superset of those still cached: eviction is the engine's)
            self.states_written: set[StateKey] = set()

        def check_step(
            self,
            live_before: list[str],
            before: EngineSnapshot,
            out: StepOutput,
            after: EngineSnapshot,
        ) -> None:
            chunks = [self.taken(chunk.request_id, before, chunk.num_computed_tokens,
                                 chunk.num_new_tokens) for chunk in out.chunks]
            super().check_step(live_before, before, out, after)
            budget_left = self.config.token_budget
            for chunk in chunks:
                self.check_chunk(chunk, budget_left)
                budget_left -= chunk.new
            block = self.config.block_size
            for chunk in chunks:
                end = chunk.start + chunk.new
                if end % block == 0:
                    self.states_written.add(state_key(chunk.facts, end, chunk.output_token_ids))

        def taken(
            self, request_id: str, before: EngineSnapshot, start: int, new: int
        ) -> _Chunk:
            progress = self.model.progress[request_id]
            snap = before.requests.get(request_id)
            outputs = tuple(snap.output_token_ids) if snap is not None else ()
            return _Chunk(
                self.model.facts[request_id], progress.outputs, progress.start is None,
                outputs, start, new,
            )

        def check_chunk(self, chunk: _Chunk, budget_left: int) -> None:
            config, step = self.config, self.steps
            facts, outputs, start, new = chunk.facts, chunk.outputs, chunk.start, chunk.new
            sys16_ends_on_a_boundary(step, config, facts, outputs, start, new)
            sys16_stops_at_the_last_hit_boundary(step, config, facts, outputs, start, new)
            if chunk.first and start > 0:
                key = state_key(facts, start, chunk.output_token_ids)
                sys16_hit_on_a_cached_state(
                    step, facts.request_id, start, key, self.states_written
                )
                self.reached("hit_at_state")
            end, block = start + new, config.block_size
            if end >= prefill_end(facts, outputs):
                return
            offsets = {item.mm_position.offset for item in facts.request.items}
            if end % block and end in offsets:
                self.reached("doorstep_inside_block")
            elif end % block == 0 and new < budget_left and end not in offsets:
                self.reached("block_cut")

    return EngineHybridMachine

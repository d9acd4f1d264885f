"""``EngineAsyncMachine``: the engine machine with async scheduling (SYS-15).

``EngineMachine`` (:mod:`properties.engine_machine`) over engines built with
``EngineConfig.async_scheduling``: each ``step()`` schedules a step and executes the one
the previous call scheduled (vLLM's ``EngineCore.step_with_batch_queue`` with two
batches), so between calls the scheduler is one step ahead of the worker — its
``num_computed_tokens`` counts the step in flight, its cache manager already holds
that step's encodes and has evicted its frees, and a request may be aborted or
preempted while its chunk is in flight. The machine follows the pipeline
(:class:`properties.engine_async_invariants.Pipeline`): every check of SYS-1..10 runs
against the step executed, with the step in flight part of the state it compares
(SYS-5's worker, SYS-7's references, SYS-10's snapshot), and SYS-15 checks that the
step executed is exactly the one scheduled, and what the snapshot says of the step in
flight. SYS-8's work conservation is judged on the state a step was scheduled from,
which only the synchronous machines see (not here); the progress bounds gain one step
for the pipeline and one per item (a reference is released by the update that follows
the next schedule, so an item waiting for its predecessor's space waits a step more).

An engine without the capability (:class:`spec.components.AsyncEngine`) runs nothing
here: every clause of this machine is not provided. Async scheduling with a drafter is
:mod:`properties.engine_async_drafter_machine`'s.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from properties.engine_machine import (
    ENGINE_MIN_PROGRAMS,
    ENGINE_SUBJECT,
    ENGINE_USES,
    SYS_CLAUSES,
    engine_machine_class,
)
from properties.engine_strategies import RawImage, scenarios
from properties.framework import Parts, Runnable, clause_property, machine, probed_engine
from spec.components import AsyncEngine
from spec.types import EngineConfig

ASYNC_CLAUSES = ("SYS-15",)


def async_probe(parts: Parts) -> str | None:
    """Why the engine cannot schedule asynchronously (None: it can): built with
    ``async_scheduling=True``, it must say it does."""
    engine = probed_engine(parts, EngineConfig(async_scheduling=True))
    runs = getattr(engine, "async_scheduling", None)
    if not isinstance(engine, AsyncEngine) or not callable(runs):
        return "the engine loop does not provide async scheduling (async_scheduling(), SYS-15)"
    if runs() is not True:
        return f"built with async_scheduling=True, the engine says {runs()!r}"
    return None


@st.composite
def async_scenarios(draw: st.DrawFn) -> tuple[EngineConfig, tuple[RawImage, ...]]:
    """``EngineMachine``'s engines and images, each engine scheduling asynchronously."""
    config, universe = draw(scenarios())
    return replace(config, async_scheduling=True), universe


@clause_property(
    "EngineAsyncMachine",
    (*SYS_CLAUSES, *ASYNC_CLAUSES),
    subject=ENGINE_SUBJECT,
    uses=ENGINE_USES,
    subject_any=True,
    capabilities=tuple((c, async_probe) for c in (*SYS_CLAUSES, *ASYNC_CLAUSES)),
)
def engine_async_machine(parts: Parts) -> Runnable:
    """SYS-1..10 and SYS-15: the engine machine with async scheduling (where the engine
    has it; without, nothing runs: every clause of it is not provided)."""
    if async_probe(parts) is not None:
        # no machine name: no transition is owed by a run that judges nothing
        return Runnable(run=lambda settings: None)
    return machine(engine_async_machine_class(parts), min_programs=ENGINE_MIN_PROGRAMS)


def engine_async_machine_class(
    parts: Parts,
    scenario_strategy: st.SearchStrategy[tuple[EngineConfig, tuple[RawImage, ...]]] | None = None,
    max_new_tokens: int = 3,
) -> type[Any]:
    """The ``EngineAsyncMachine`` class (with a drafter's ``scenario_strategy`` and
    longer requests, the base of :mod:`properties.engine_async_drafter_machine`)."""
    drawn = async_scenarios() if scenario_strategy is None else scenario_strategy
    base: Any = engine_machine_class(parts, drawn, max_new_tokens)

    class EngineAsyncMachine(base):  # type: ignore[misc]
        def sampling_in_flight(self) -> list[str]:
            """Requests whose chunk in flight will sample (its output goes stale if the
            request is preempted now)."""
            found = []
            for request_id, _, _ in self.pipeline.chunks:
                progress = self.model.progress.get(request_id)
                own_end = self.pipeline.own_end_of(request_id)
                if progress is None or own_end is None:
                    continue
                if own_end == self.model.facts[request_id].num_tokens(progress.outputs):
                    found.append(request_id)
            return found

        @precondition(lambda self: bool(self.sampling_in_flight()))
        @rule(data=st.data())
        def preempt_sampling_in_flight(self, data: st.DataObject) -> None:
            """Aim at SYS-15's stale output: preempt a request whose sampling chunk is in
            flight, then step (the request may resume while that chunk executes)."""
            request_id = data.draw(st.sampled_from(self.sampling_in_flight()), label="in flight")
            self.preempt_one(request_id)
            self.run_step()

    return EngineAsyncMachine

"""``EngineAsyncDrafterMachine``: async scheduling and a drafter together (SYS-13..15).

``EngineAsyncMachine`` (:mod:`properties.engine_async_machine`) over engines built with
``async_scheduling`` *and* ``num_speculative_tokens`` k ∈ {1, 2}, with
``EngineDrafterMachine``'s checks (:mod:`properties.engine_drafter_machine`) after every
step. What the two modes do together, and what SYS-15 says of it:

- A request's next chunk is scheduled while the step that samples its previous token is
  in flight, before that token and the drafter's proposals after it exist: it verifies
  ``d ≤ k`` drafts the worker fills in (vLLM's ``AsyncScheduler`` schedules ``[-1] * k``
  placeholders), and its start assumes the step in flight accepts all its drafts.
- When that step rejects ``r`` drafts, the scheduler's frontier rolls back by ``r``, and
  the worker executes the chunk in flight ``r`` positions earlier (vLLM's model runner
  corrects its optimistic start on the device): ``in_flight`` reports the chunk where it
  will execute, and the executed chunk is that one (SYS-15's "exactly what was left in
  flight"), its own part ending at ``P + g`` (SYS-14). The machine reaches this as
  ``rejected_with_chunk_in_flight``.
- A chunk scheduled after one that could finish its request only by accepting drafts is
  executed and dropped when they were accepted (vLLM schedules it: it skips a request
  only when the step in flight is sure to finish it).

An engine without both capabilities, or that refuses the config (SYS-9), runs nothing
here: every clause of this machine is not provided.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from properties.engine_async_machine import ASYNC_CLAUSES, async_probe, engine_async_machine_class
from properties.engine_drafter_machine import (
    DRAFTER_CLAUSES,
    DRAFTER_MAX_NEW_TOKENS,
    drafter_probe,
    engine_drafter_machine_class,
)
from properties.engine_machine import (
    ENGINE_MIN_PROGRAMS,
    ENGINE_SUBJECT,
    ENGINE_USES,
    SYS_CLAUSES,
)
from properties.engine_strategies import RawImage, scenarios
from properties.framework import Parts, Runnable, clause_property, machine, probed_engine
from spec.components import AsyncEngine, EngineSnapshot, SpeculativeEngine, StepOutput
from spec.errors import InvalidInputError
from spec.types import EngineConfig

ASYNC_DRAFTER_CLAUSES = (*SYS_CLAUSES, *DRAFTER_CLAUSES, *ASYNC_CLAUSES)


def async_drafter_probe(parts: Parts) -> str | None:
    """Why the engine cannot run a drafter with async scheduling (None: it can): it has
    both capabilities, and built with both it says it runs both."""
    lacking = async_probe(parts) or drafter_probe(parts)
    if lacking:
        return lacking
    config = EngineConfig(async_scheduling=True, num_speculative_tokens=1)
    try:
        engine = probed_engine(parts, config)
    except InvalidInputError as error:
        return f"the engine refuses async scheduling with a drafter: {error}"
    if not isinstance(engine, AsyncEngine) or not isinstance(engine, SpeculativeEngine):
        return "the engine loop does not provide async scheduling and a drafter together"
    if engine.async_scheduling() is not True or engine.num_speculative_tokens() != 1:
        return (
            "built with async_scheduling=True and num_speculative_tokens=1, the engine says "
            f"{engine.async_scheduling()!r} and {engine.num_speculative_tokens()!r}"
        )
    return None


@st.composite
def async_drafter_scenarios(draw: st.DrawFn) -> tuple[EngineConfig, tuple[RawImage, ...]]:
    """``EngineMachine``'s engines and images, each scheduling asynchronously with a
    drafter of 1 or 2."""
    config, universe = draw(scenarios())
    k = draw(st.integers(1, 2), label="num_speculative_tokens")
    return replace(config, async_scheduling=True, num_speculative_tokens=k), universe


@clause_property(
    "EngineAsyncDrafterMachine",
    ASYNC_DRAFTER_CLAUSES,
    subject=ENGINE_SUBJECT,
    uses=ENGINE_USES,
    subject_any=True,
    capabilities=tuple((c, async_drafter_probe) for c in ASYNC_DRAFTER_CLAUSES),
)
def engine_async_drafter_machine(parts: Parts) -> Runnable:
    """SYS-1..10 and SYS-13..15: the engine machine with async scheduling and a drafter
    together (where the engine has both; otherwise nothing runs: not provided)."""
    if async_drafter_probe(parts) is not None:
        # no machine name: no transition is owed by a run that judges nothing
        return Runnable(run=lambda settings: None)
    return machine(engine_async_drafter_machine_class(parts), min_programs=ENGINE_MIN_PROGRAMS)


def engine_async_drafter_machine_class(parts: Parts) -> type[Any]:
    base = engine_async_machine_class(parts, async_drafter_scenarios(), DRAFTER_MAX_NEW_TOKENS)
    drafter: Any = engine_drafter_machine_class(parts, base)

    class EngineAsyncDrafterMachine(drafter):  # type: ignore[misc]
        def check_step(
            self,
            live_before: list[str],
            before: EngineSnapshot,
            out: StepOutput,
            after: EngineSnapshot,
        ) -> None:
            executed_stale = self.pipeline.stale | set(out.preempted)
            super().check_step(live_before, before, out, after)
            # the chunks now left in flight that will move their requests
            moving = {c.request_id for c in out.in_flight} - self.pipeline.stale
            for chunk in out.chunks:
                rejected = chunk.num_accepted_drafts < chunk.num_draft_tokens
                rid = chunk.request_id
                if rejected and rid in moving and rid not in executed_stale:
                    self.reached("rejected_with_chunk_in_flight")

    return EngineAsyncDrafterMachine

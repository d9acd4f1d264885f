"""``EngineDrafterMachine``: the engine machine with an EAGLE-style drafter (SYS-13,
SYS-14).

``EngineMachine`` (:mod:`properties.engine_machine`) over engines built with
``EngineConfig.num_speculative_tokens`` k ∈ {1, 2}: the scheduling hook looks one
position ahead (``shift_computed_tokens = 1``), the KV cache reserves k look-ahead slots
per running request, and each step's drafter reads every chunk ``[c, c + n)`` shifted
by one, ``[c + 1, c + n + 1)``, after the target and in the same worker state
(``ScheduledChunk.draft_gathered``). Every check of SYS-1..10 runs as in
``EngineMachine`` (SYS-3's "consumed" covers the look-ahead, SYS-9's KV positions the
look-ahead slots, SYS-8's bounds are unchanged: the look-ahead may never cost a
request its progress), and after every step the drafter's rows are checked
(:func:`properties.engine_drafter_invariants.sys13_draft_rows`).

The drafts themselves (SYS-14): after a request samples, its drafter may propose up to
k tokens, which its next chunk verifies as its last positions
(``ScheduledChunk.num_draft_tokens``, ``num_accepted_drafts``); the machine checks
where they sit and that rejected ones roll back, and follows the request by what was
accepted (``1 + a`` tokens sampled). It does not predict acceptance: that is the
engine's drafter and target, and SYS-6 judges an accepted draft by the KV it left.
Requests ask for up to 5 tokens here, so that drafts are proposed, accepted and
rejected. Async scheduling is the next step (docs/design/spec_decode_async.md).

An engine without the capability (:class:`spec.components.SpeculativeEngine`, reporting
the k it was built with) runs nothing here: every clause of this machine is not
provided, and ``EngineMachine`` judges SYS-1..10 alone.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import strategies as st

from properties.engine_drafter_invariants import (
    sys13_draft_rows,
    sys14_draft_counts,
    sys14_rejections_rolled_back,
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
from properties.models.engine import RequestFacts, RequestProgress
from spec.components import EngineSnapshot, ScheduledChunk, SpeculativeEngine, StepOutput
from spec.types import EngineConfig

DRAFTER_CLAUSES = ("SYS-13", "SYS-14")

#: requests ask for up to this many tokens: room for drafts after the first sample
DRAFTER_MAX_NEW_TOKENS = 5


def drafter_probe(parts: Parts) -> str | None:
    """Why the engine cannot run a drafter (None: it can): built with k = 1, it must
    say it runs k = 1."""
    engine = probed_engine(parts, EngineConfig(num_speculative_tokens=1))
    runs = getattr(engine, "num_speculative_tokens", None)
    if not isinstance(engine, SpeculativeEngine) or not callable(runs):
        return "the engine loop does not provide a drafter (num_speculative_tokens(), SYS-13)"
    k = runs()
    if k != 1:
        return f"built with num_speculative_tokens=1, the engine runs a drafter of {k!r}"
    return None


@st.composite
def drafter_scenarios(draw: st.DrawFn) -> tuple[EngineConfig, tuple[RawImage, ...]]:
    """``EngineMachine``'s engines and images, each engine with a drafter of 1 or 2."""
    config, universe = draw(scenarios())
    k = draw(st.integers(1, 2), label="num_speculative_tokens")
    return replace(config, num_speculative_tokens=k), universe


@clause_property(
    "EngineDrafterMachine",
    (*SYS_CLAUSES, *DRAFTER_CLAUSES),
    subject=ENGINE_SUBJECT,
    uses=ENGINE_USES,
    subject_any=True,
    capabilities=tuple((c, drafter_probe) for c in (*SYS_CLAUSES, *DRAFTER_CLAUSES)),
)
def engine_drafter_machine(parts: Parts) -> Runnable:
    """SYS-1..10, SYS-13 and SYS-14: the engine machine with a drafter (where the engine has
    one; without, nothing runs: every clause of it is not provided)."""
    if drafter_probe(parts) is not None:
        # no machine name: no transition is owed by a run that judges nothing
        return Runnable(run=lambda settings: None)
    return machine(engine_drafter_machine_class(parts), min_programs=ENGINE_MIN_PROGRAMS)


def engine_drafter_machine_class(parts: Parts, base: type[Any] | None = None) -> type[Any]:
    """The ``EngineDrafterMachine`` class; over ``base`` (default: the engine machine with
    :func:`drafter_scenarios`) the drafter's checks join another machine's
    (:mod:`properties.engine_async_drafter_machine`)."""
    if base is None:
        base = engine_machine_class(parts, drafter_scenarios(), DRAFTER_MAX_NEW_TOKENS)

    class EngineDrafterMachine(base):  # type: ignore[misc,valid-type]
        def check_step(
            self,
            live_before: list[str],
            before: EngineSnapshot,
            out: StepOutput,
            after: EngineSnapshot,
        ) -> None:
            # the drafter's rows, kept before the target's checks spoil what they read
            drafts = [tuple(np.copy(rows) for rows in c.draft_gathered) for c in out.chunks]
            facts = [self.model.facts[c.request_id] for c in out.chunks]
            # a stale chunk (async scheduling) no longer moves its request
            stale = self.pipeline.stale | set(out.preempted)
            for chunk in out.chunks:
                if chunk.request_id not in stale:
                    in_flight = sum(
                        c.num_new_tokens for c in out.in_flight if c.request_id == chunk.request_id
                    )
                    sys14_rejections_rolled_back(self.steps, chunk, after, in_flight)
            super().check_step(live_before, before, out, after)
            for chunk, chunk_facts, served in zip(out.chunks, facts, drafts, strict=True):
                start, new = chunk.num_computed_tokens, chunk.num_new_tokens
                for transition in sys13_draft_rows(self.steps, chunk_facts, start, new, served):
                    self.reached(transition)

        def check_drafts(
            self, facts: RequestFacts, progress: RequestProgress, chunk: ScheduledChunk
        ) -> tuple[int, int]:
            k = self.config.num_speculative_tokens
            drafts, accepted = sys14_draft_counts(self.steps, k, facts, progress, chunk)
            if accepted:
                self.reached("draft_accepted")
            if accepted < drafts:
                self.reached("draft_rejected")
            return drafts, accepted

    return EngineDrafterMachine

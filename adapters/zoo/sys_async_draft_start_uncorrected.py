"""Async scheduling with a drafter: the worker executes a chunk scheduled while the
step before it was in flight at the start the scheduler assumed (every draft of that
step accepted), although that step rejected some: the scheduler rolls its frontier
back, the chunk lands past it: what was executed and what the scheduler counts drift
apart, and the rejected drafts' positions are never computed again (SYS-10)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Request
from spec.adapter import Adapter

BREAKS = "SYS-10"
KILLED_BY = "EngineAsyncDrafterMachine"
ORIGIN = (
    "typical student error: a runner that trusts the scheduler's optimistic positions; "
    "vLLM's GPUModelRunner corrects them by the previous step's rejections "
    "(deferred_spec_decode_corrections, 0.33.0)"
)


class DraftStartUncorrected(EngineLoop):
    def _roll_back_in_flight(self, state: _Request, rejected: int) -> None:
        # BUG: only the scheduler's frontier rolls back; the chunk in flight keeps the
        # start it was scheduled at
        state.num_computed_tokens -= rejected


ADAPTER = Adapter(name="zoo.sys_async_draft_start_uncorrected", engine_loop=DraftStartUncorrected)

"""Rejected drafts are not rolled back: after verifying ``d`` drafts the request counts
all ``c + n`` positions computed, ``d − a`` of them holding drafts the target rejected
(SYS-14)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.engine import EngineLoop, _Scheduled
from spec.adapter import Adapter

BREAKS = "SYS-14"
KILLED_BY = "EngineDrafterMachine"
ORIGIN = (
    "typical student error: num_computed_tokens advanced by every scheduled token; "
    "vLLM's update_from_output subtracts num_rejected after the rejection sampler"
)


class RejectedDraftsKept(EngineLoop):
    def _update(self, scheduled: Sequence[_Scheduled]) -> list[str]:
        finished = super()._update(scheduled)
        for entry in scheduled:
            state = entry.state
            if state.request_id in self._requests and entry.drafts:
                # BUG: the rejected drafts stay computed
                state.num_computed_tokens = entry.num_computed_tokens + entry.num_new_tokens
        return finished


ADAPTER = Adapter(name="zoo.sys_rejected_drafts_kept", engine_loop=RejectedDraftsKept)

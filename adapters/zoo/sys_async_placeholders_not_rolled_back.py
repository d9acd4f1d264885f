"""Async scheduling with a drafter: a step's output takes back one placeholder per token
it sampled (``1 + a``), not the ``1 + d`` it added, so every rejected draft leaves a
placeholder behind; the scheduler then believes the request's last tokens are still
coming, skips it while nothing is in flight, and it never finishes (SYS-8)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.engine import EngineLoop, _Scheduled
from spec.adapter import Adapter

BREAKS = "SYS-8"
KILLED_BY = "EngineAsyncDrafterMachine"
ORIGIN = (
    "typical student error: placeholders resolved by the tokens returned only; vLLM's "
    "update_from_output also subtracts num_rejected from num_output_placeholders "
    "(0.33.0; its comment: the placeholders cover the spec tokens)"
)


class PlaceholdersNotRolledBack(EngineLoop):
    def _update(self, scheduled: Sequence[_Scheduled]) -> list[str]:
        finished = super()._update(scheduled)
        for entry in scheduled:
            state = entry.state
            if state.request_id in self._requests and not entry.stale and entry.samples:
                # BUG: the rejected drafts' placeholders stay
                state.num_output_placeholders += len(entry.drafts) - entry.accepted
        return finished


ADAPTER = Adapter(
    name="zoo.sys_async_placeholders_not_rolled_back", engine_loop=PlaceholdersNotRolledBack
)

"""Releases encoder references when a chunk is scheduled instead of after the step that
consumes them, so a later request in the same step can evict them first (SYS-1)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Scheduled, _StepBudget
from spec.adapter import Adapter

BREAKS = "SYS-1"
KILLED_BY = "EngineMachine"
ORIGIN = (
    "typical student error: free_encoder_input at scheduling time instead of after the step "
    "that consumes the embeddings"
)


class FreesRefsAtScheduling(EngineLoop):
    def _commit(self, entry: _Scheduled, budget: _StepBudget, scheduled: list[_Scheduled]) -> None:
        super()._commit(entry, budget, scheduled)
        end = entry.num_computed_tokens + entry.num_new_tokens
        view = entry.state.view
        for input_id in sorted(self._cache.get_cached_input_ids(view)):
            if view.items[input_id].mm_position.end <= end:
                # BUG: the worker has not gathered these rows yet
                self._cache.free_encoder_input(view, input_id)


ADAPTER = Adapter(name="zoo.sys_frees_refs_before_consumption", engine_loop=FreesRefsAtScheduling)

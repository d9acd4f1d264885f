"""Preemption releases the KV blocks but not the encoder-cache references (SYS-7)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Request
from spec.adapter import Adapter

BREAKS = "SYS-7"
KILLED_BY = "EngineMachine"
ORIGIN = (
    "typical student error: preemption frees the KV blocks (Phase 3) but forgets "
    "encoder_cache_manager.free(request)"
)


class PreemptKeepsRefs(EngineLoop):
    def _preempt(self, state: _Request) -> None:
        self._kv.free(state.block_ids)  # BUG: self._cache.free(state.view) is missing
        state.block_ids = []
        state.num_cached_blocks = 0
        state.status = "waiting"
        state.num_computed_tokens = 0
        self._waiting.appendleft(state)


ADAPTER = Adapter(name="zoo.sys_preempt_keeps_refs", engine_loop=PreemptKeepsRefs)

"""With async scheduling, the output of a chunk scheduled before its request was
preempted is applied to the request after it resumed: the resumed request gains a
token behind the chunks it already runs again, and samples it twice (SYS-15)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.engine import EngineLoop, _Scheduled, sampled_token_id
from spec.adapter import Adapter

BREAKS = "SYS-15"
KILLED_BY = "EngineAsyncMachine"
ORIGIN = (
    "typical student error: a stale frame's sample appended to the resumed request; "
    "vLLM 0.33.0 drops it when the request may resume first (drop_stale_output=True "
    "from reset_prefix_cache), 0.22.1 discards frames by async_tokens_to_discard (#42043)"
)


class StaleOutputApplied(EngineLoop):
    def _update(self, scheduled: Sequence[_Scheduled]) -> list[str]:
        for entry in scheduled:
            state = entry.state
            left = state.request.max_new_tokens - len(state.output_token_ids)
            if entry.stale and entry.samples and state.status == "running" and left > 1:
                # BUG: the resumed request takes the stale frame's sample
                state.output_token_ids.append(sampled_token_id(len(state.output_token_ids)))
                state.block_hashes = self._block_hashes(state.request, state.output_token_ids)
        return super()._update(scheduled)


ADAPTER = Adapter(name="zoo.sys_async_stale_output_applied", engine_loop=StaleOutputApplied)

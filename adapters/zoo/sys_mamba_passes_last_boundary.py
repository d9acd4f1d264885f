"""A hybrid model's last forced stop is at ``P + g − (P + g) mod bs``: with ``P + g`` a
whole number of blocks that is ``P + g`` itself, which no prefix hit can use (a hit
leaves a position to compute), so the state a repeated prompt could resume from,
one block earlier, is never written (SYS-16)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Request
from reference.hybrid import aligned_chunk
from spec.adapter import Adapter

BREAKS = "SYS-16"
KILLED_BY = "EngineHybridMachine"
ORIGIN = (
    "vLLM v0.22.1 v1/core/sched/scheduler.py: _mamba_block_aligned_split's "
    "last_cache_position = num_tokens - num_tokens % block_size (v0.33.0: "
    "get_mamba_prefill_checkpoint_position leaves a token for the logits)"
)


class PassesLastBoundary(EngineLoop):
    def _aligned(self, state: _Request, computed: int, proposed: int) -> int:
        # BUG: the stop one token further on, P + g when that is a whole block
        return aligned_chunk(
            computed, proposed, len(state.request.token_ids), state.num_tokens + 1,
            self._kv.block_size, self._config.token_budget, self._whole_items(state),
        )


ADAPTER = Adapter(name="zoo.sys_mamba_passes_last_boundary", engine_loop=PassesLastBoundary)

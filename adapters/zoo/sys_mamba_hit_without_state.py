"""A hybrid model resumes at the longest cached prefix of KV blocks, as an attention
model does, whether or not a chunk ended there: the recurrent state after the hit was
never written (SYS-16)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Request
from spec.adapter import Adapter

BREAKS = "SYS-16"
KILLED_BY = "EngineHybridMachine"
ORIGIN = (
    "typical student error: the attention prefix cache reused for the Mamba layers, "
    "every full block a hit"
)


class HitWithoutState(EngineLoop):
    def _prefix_hit(self, state: _Request) -> list[int]:
        if not self._config.enable_prefix_caching:
            return []
        max_blocks = (state.num_tokens - 1) // self._kv.block_size
        return self._kv.longest_cached_prefix(state.block_hashes, max_blocks)  # BUG


ADAPTER = Adapter(name="zoo.sys_mamba_hit_without_state", engine_loop=HitWithoutState)

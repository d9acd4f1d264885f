"""``reset_prefix_cache()`` with requests running drops the hashes of the free blocks
only and reports success: the blocks in use stay findable, and a later request is
served KV computed before the reset (SYS-11)."""

from __future__ import annotations

from reference.engine import EngineLoop
from spec.adapter import Adapter

BREAKS = "SYS-11"
KILLED_BY = "EngineResetMachine"
ORIGIN = (
    "typical student error: 'reset what can be reset' instead of refusing while blocks "
    "are in use (vLLM's BlockPool.reset_prefix_cache returns False then)"
)


class PrefixResetSparesUsedBlocks(EngineLoop):
    def reset_prefix_cache(self) -> bool:
        kv = self._kv
        for block_hash, block in list(kv.cached.items()):
            if kv.ref_cnt[block] == 0:
                del kv.cached[block_hash]
                kv.block_hash[block] = None
        # BUG: blocks in use keep their hashes, and the reset reports success
        return True


ADAPTER = Adapter(
    name="zoo.sys_prefix_reset_spares_used_blocks", engine_loop=PrefixResetSparesUsedBlocks
)

"""A hybrid model's prefill chunks end wherever the token budget runs out (only the
stop at the last boundary a prefix hit can use is kept): the recurrent state is cached
only at the few chunk ends that happen to be block boundaries (SYS-16)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Request
from reference.hybrid import stopped
from spec.adapter import Adapter

BREAKS = "SYS-16"
KILLED_BY = "EngineHybridMachine"
ORIGIN = "typical student error: the flag accepted, the budget's cut left where it falls"


class BudgetUnaligned(EngineLoop):
    def _aligned(self, state: _Request, computed: int, proposed: int) -> int:
        end = computed + proposed  # BUG: not cut back to a block boundary
        if computed >= max(len(state.request.token_ids), state.num_tokens - 1):
            return proposed
        return stopped(
            computed, end, end, state.num_tokens, self._kv.block_size, self._whole_items(state)
        ) - computed


ADAPTER = Adapter(name="zoo.sys_mamba_budget_unaligned", engine_loop=BudgetUnaligned)

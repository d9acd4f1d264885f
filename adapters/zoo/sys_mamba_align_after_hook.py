"""A hybrid model's block alignment applied after the hook: an image the hook scheduled
for the budget's chunk is encoded though the floored chunk reads none of it (SYS-3),
and a chunk the hook stopped at an image's doorstep inside a block is floored back to
nothing, at every step, while the request holds the encoder cache its next image needs
(SYS-8)."""

from __future__ import annotations

from dataclasses import replace

from reference.engine import EngineLoop, _Request, _StepBudget
from spec.adapter import Adapter
from spec.types import ScheduleDecision

BREAKS = "SYS-3"
KILLED_BY = "EngineHybridMachine"
ORIGIN = (
    "vLLM v0.22.1 v1/core/sched/scheduler.py: _mamba_block_aligned_split runs after "
    "_try_schedule_encoder_inputs, so the doorstep chunk floors to 0 and the request "
    "never advances (vllm-project/vllm#40707; v0.33.0 aligns first, #51603)"
)


class AlignAfterHook(EngineLoop):
    def _try_schedule(
        self, state: _Request, computed: int, budget: _StepBudget
    ) -> ScheduleDecision:
        hybrid, self._hybrid = self._hybrid, False  # the hook on the budget's chunk
        try:
            decision = super()._try_schedule(state, computed, budget)
        finally:
            self._hybrid = hybrid
        if not hybrid:
            return decision
        # BUG: the alignment cuts what the hook left, down to nothing at a doorstep
        new = self._aligned(state, computed, decision.num_new_tokens)
        return replace(decision, num_new_tokens=new)


ADAPTER = Adapter(name="zoo.sys_mamba_align_after_hook", engine_loop=AlignAfterHook)

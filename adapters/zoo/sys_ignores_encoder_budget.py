"""Gives every request the whole per-step encoder budget instead of what earlier
requests of the step left (SYS-4)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Request, _StepBudget
from spec.adapter import Adapter
from spec.types import ScheduleDecision

BREAKS = "SYS-4"
KILLED_BY = "EngineMachine"
ORIGIN = (
    "typical student error: the per-step encoder budget passed to every request afresh "
    "instead of threaded through the step"
)


class IgnoresEncoderBudget(EngineLoop):
    def _try_schedule(
        self, state: _Request, computed: int, budget: _StepBudget
    ) -> ScheduleDecision:
        full = _StepBudget(budget.tokens, self._config.encoder_compute_budget)  # BUG
        return super()._try_schedule(state, computed, full)


ADAPTER = Adapter(name="zoo.sys_ignores_encoder_budget", engine_loop=IgnoresEncoderBudget)

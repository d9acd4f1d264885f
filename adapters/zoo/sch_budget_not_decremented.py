"""Returns the budget it was given, not what the scheduled encodes left (SCH-7)."""

from __future__ import annotations

from dataclasses import replace

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.components import EncoderCacheManager
from spec.types import RequestView, ScheduleDecision

BREAKS = "SCH-7"
KILLED_BY = "sch_budget_accounting"
ORIGIN = (
    "typical student error: returning the budget argument unchanged instead of the "
    "decremented local"
)


class BudgetNotDecremented(SchedulingHook):
    def try_schedule_encoder_inputs(
        self,
        request: RequestView,
        num_computed_tokens: int,
        num_new_tokens: int,
        encoder_compute_budget: int,
        cache: EncoderCacheManager,
        shift_computed_tokens: int = 0,
    ) -> ScheduleDecision:
        d = super().try_schedule_encoder_inputs(
            request,
            num_computed_tokens,
            num_new_tokens,
            encoder_compute_budget,
            cache,
            shift_computed_tokens,
        )
        return replace(d, encoder_compute_budget=encoder_compute_budget)  # BUG


ADAPTER = Adapter(name="zoo.sch_budget_not_decremented", scheduling_hook=BudgetNotDecremented)

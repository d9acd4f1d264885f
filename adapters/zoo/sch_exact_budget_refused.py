"""The hook refuses an item exactly the size of the remaining encoder budget, and stops the
chunk at its doorstep although it was affordable (SCH-5)."""

from __future__ import annotations

from typing import Any, cast

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.components import EncoderCacheManager
from spec.types import RequestView, ScheduleDecision

BREAKS = "SCH-5"
KILLED_BY = "sch_doorstep_truncation"
ORIGIN = (
    "typical student error: the hook's own budget test `num_embeds >= budget` "
    "(the lab-03 'does it fit' check written with the wrong comparison)"
)


class _ExactFitRefused:
    """The caller's cache, behind the hook's off-by-one budget test."""

    def __init__(self, cache: EncoderCacheManager) -> None:
        self.cache = cache

    def can_allocate(self, request: RequestView, input_id: int, budget: int, planned: int) -> bool:
        if request.item(input_id).num_embeds >= budget:  # BUG: `>=` for `>`
            return False
        return self.cache.can_allocate(request, input_id, budget, planned)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cache, name)


class ExactBudgetRefused(SchedulingHook):
    def try_schedule_encoder_inputs(
        self,
        request: RequestView,
        num_computed_tokens: int,
        num_new_tokens: int,
        encoder_compute_budget: int,
        cache: EncoderCacheManager,
        shift_computed_tokens: int = 0,
    ) -> ScheduleDecision:
        return super().try_schedule_encoder_inputs(
            request,
            num_computed_tokens,
            num_new_tokens,
            encoder_compute_budget,
            cast(EncoderCacheManager, _ExactFitRefused(cache)),
            shift_computed_tokens,
        )


ADAPTER = Adapter(name="zoo.sch_exact_budget_refused", scheduling_hook=ExactBudgetRefused)

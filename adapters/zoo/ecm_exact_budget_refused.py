"""can_allocate refuses an item whose size equals the remaining compute budget (ECM-4)."""

from __future__ import annotations

from reference.encoder_cache import EncoderCacheManager
from spec.adapter import Adapter
from spec.types import RequestView

BREAKS = "ECM-4"
KILLED_BY = "EncoderCacheMachine"
ORIGIN = "typical student error: `num_embeds >= budget` for vLLM's `num_embeds > budget`"


class ExactBudgetRefused(EncoderCacheManager):
    def can_allocate(
        self,
        request: RequestView,
        input_id: int,
        encoder_compute_budget: int,
        num_embeds_to_schedule: int,
    ) -> bool:
        if request.item(input_id).num_embeds >= encoder_compute_budget:  # BUG: `>=`
            return False
        return super().can_allocate(
            request, input_id, encoder_compute_budget, num_embeds_to_schedule
        )


ADAPTER = Adapter(name="zoo.ecm_exact_budget_refused", encoder_cache_manager=ExactBudgetRefused)

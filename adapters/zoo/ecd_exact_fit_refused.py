"""can_allocate refuses an item that exactly fills the free slots (ECD-4)."""

from __future__ import annotations

from reference.encoder_decoder_cache import EncoderDecoderCacheManager
from spec.adapter import Adapter
from spec.types import RequestView

BREAKS = "ECD-4"
KILLED_BY = "EncoderDecoderCacheMachine"
ORIGIN = "typical student error: `num_embeds + planned < num_free_slots` for vLLM's `<=`"


class ExactFitRefused(EncoderDecoderCacheManager):
    def can_allocate(
        self,
        request: RequestView,
        input_id: int,
        encoder_compute_budget: int,
        num_embeds_to_schedule: int,
    ) -> bool:
        needed = request.item(input_id).num_embeds + num_embeds_to_schedule
        if needed >= self.num_free_slots:  # BUG: `>=`, an exact fit is refused
            return False
        return super().can_allocate(
            request, input_id, encoder_compute_budget, num_embeds_to_schedule
        )


ADAPTER = Adapter(
    name="zoo.ecd_exact_fit_refused", encoder_decoder_cache_manager=ExactFitRefused
)

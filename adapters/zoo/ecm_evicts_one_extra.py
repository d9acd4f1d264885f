"""Evicts one more freeable entry than needed to make room (ECM-5)."""

from __future__ import annotations

from reference.encoder_cache import EncoderCacheManager
from spec.adapter import Adapter
from spec.types import RequestView

BREAKS = "ECM-5"
KILLED_BY = "EncoderCacheMachine"
ORIGIN = (
    "typical student error: the eviction loop tests its condition after popping (a "
    "do-while), so it evicts one entry past enough"
)


class EvictsOneExtra(EncoderCacheManager):
    def can_allocate(
        self,
        request: RequestView,
        input_id: int,
        encoder_compute_budget: int,
        num_embeds_to_schedule: int,
    ) -> bool:
        evicting = request.item(input_id).num_embeds + num_embeds_to_schedule > (
            self.num_free_slots
        )
        granted = super().can_allocate(
            request, input_id, encoder_compute_budget, num_embeds_to_schedule
        )
        if granted and evicting and self._freeable:  # BUG: one eviction too many
            evicted, _ = self._freeable.popitem(last=False)
            del self._cached[evicted]
            del self._num_embeds[evicted]
            self._freed.append(evicted)
        return granted


ADAPTER = Adapter(name="zoo.ecm_evicts_one_extra", encoder_cache_manager=EvictsOneExtra)

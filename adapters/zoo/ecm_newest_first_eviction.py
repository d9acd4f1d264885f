"""Evicts the most recently released entry first instead of the oldest (ECM-5)."""

from __future__ import annotations

from reference.encoder_cache import EncoderCacheManager
from spec.adapter import Adapter
from spec.types import RequestView

BREAKS = "ECM-5"
KILLED_BY = "EncoderCacheMachine"
ORIGIN = (
    "typical student error: `freeable.popitem()` (last=True, LIFO by default) instead of "
    "`popitem(last=False)`"
)


class NewestFirstEviction(EncoderCacheManager):
    def can_allocate(
        self,
        request: RequestView,
        input_id: int,
        encoder_compute_budget: int,
        num_embeds_to_schedule: int,
    ) -> bool:
        needed = request.item(input_id).num_embeds + num_embeds_to_schedule
        if request.item(input_id).num_embeds > encoder_compute_budget:
            return False
        if needed > self.num_freeable_slots:
            return False
        while needed > self.num_free_slots:
            evicted, _ = self._freeable.popitem(last=True)  # BUG: newest first
            del self._cached[evicted]
            del self._num_embeds[evicted]
            self._freed.append(evicted)
        return True


ADAPTER = Adapter(name="zoo.ecm_newest_first_eviction", encoder_cache_manager=NewestFirstEviction)

"""Evicts oldest-allocated entries even if referenced: seed 004's FIFO cache (ECM-5)."""

from __future__ import annotations

from reference.encoder_cache import EncoderCacheManager
from spec.adapter import Adapter
from spec.types import RequestView

BREAKS = "ECM-5"
KILLED_BY = "EncoderCacheMachine"
ORIGIN = (
    "seed 004 VisionEncoderCache: FIFO eviction of the oldest entry "
    "(`next(iter(self.cache))`) whether or not a request still uses it"
)


class EvictsReferenced(EncoderCacheManager):
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
            evicted = next(iter(self._num_embeds))  # BUG: oldest allocation, even if in use
            del self._cached[evicted]
            del self._num_embeds[evicted]
            self._freeable.pop(evicted, None)
            self._freed.append(evicted)
        return True


ADAPTER = Adapter(name="zoo.ecm_evicts_referenced", encoder_cache_manager=EvictsReferenced)

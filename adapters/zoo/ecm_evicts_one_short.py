"""Eviction stops one entry early: can_allocate grants an item the free slots do not yet
cover (ECM-5)."""

from __future__ import annotations

from reference.encoder_cache import EncoderCacheManager
from spec.adapter import Adapter
from spec.types import RequestView

BREAKS = "ECM-5"
KILLED_BY = "EncoderCacheMachine"
ORIGIN = (
    "typical student error: the eviction loop counts the next freeable entry as already "
    "evicted (`needed > free + next_size`), an off-by-one in the loop condition"
)


class EvictsOneShort(EncoderCacheManager):
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
        # BUG: stops while the oldest freeable entry would still have to go
        while self._freeable and needed > self.num_free_slots + next(iter(self._freeable.values())):
            evicted, _ = self._freeable.popitem(last=False)
            del self._cached[evicted]
            del self._num_embeds[evicted]
            self._freed.append(evicted)
        return True


ADAPTER = Adapter(name="zoo.ecm_evicts_one_short", encoder_cache_manager=EvictsOneShort)

"""``reset`` drops the pending reports but keeps the allocations charged (ECD-6)."""

from __future__ import annotations

from reference.encoder_decoder_cache import EncoderDecoderCacheManager
from spec.adapter import Adapter

BREAKS = "ECD-6"
KILLED_BY = "EncoderDecoderCacheMachine"
ORIGIN = (
    "typical student error: reset clears what the worker is told and forgets the "
    "budget, the kind of slip a field added to the class but not to reset makes"
)


class ResetKeepsAllocations(EncoderDecoderCacheManager):
    def reset(self) -> None:
        allocations = {rid: dict(items) for rid, items in self._allocations.items()}
        super().reset()
        self._allocations = allocations  # BUG: the allocations stay charged


ADAPTER = Adapter(
    name="zoo.ecd_reset_keeps_allocations", encoder_decoder_cache_manager=ResetKeepsAllocations
)

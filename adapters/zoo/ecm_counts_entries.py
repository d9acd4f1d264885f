"""Counts free slots in entries instead of embeddings (ECM-1)."""

from __future__ import annotations

from reference.encoder_cache import EncoderCacheManager
from spec.adapter import Adapter

BREAKS = "ECM-1"
KILLED_BY = "EncoderCacheMachine"
ORIGIN = (
    "seed 004 VisionEncoderCache: capacity is `max_cache_size` entries (`len(self.cache) >= "
    "self.max_size`), not embeddings"
)


class CountsEntries(EncoderCacheManager):
    @property
    def num_free_slots(self) -> int:
        return self.cache_size - len(self._num_embeds)  # BUG: one slot per entry


ADAPTER = Adapter(name="zoo.ecm_counts_entries", encoder_cache_manager=CountsEntries)

"""Accepts a held hash shown with another embedding count, as vLLM v0.22.1 does (HASH-6)."""

from __future__ import annotations

from reference.encoder_cache import EncoderCacheManager
from spec.adapter import Adapter
from spec.types import RequestView

BREAKS = "HASH-6"
KILLED_BY = "hash_count_mismatch_rejected"


class AcceptsCountMismatch(EncoderCacheManager):
    def check_and_update_cache(self, request: RequestView, input_id: int) -> bool:
        mm_hash = request.item(input_id).mm_hash
        if mm_hash not in self._cached:
            return False
        self._reference(request, input_id, mm_hash)  # BUG: no count check against the held entry
        return True


ADAPTER = Adapter(name="zoo.ecm_accepts_count_mismatch", encoder_cache_manager=AcceptsCountMismatch)

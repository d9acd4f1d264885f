"""Accepts a held hash shown with another embedding count, as vLLM v0.22.1 does (HASH-6)."""

from __future__ import annotations

from reference.encoder_cache import EncoderCacheManager
from spec.adapter import Adapter
from spec.types import RequestView

BREAKS = "HASH-6"
KILLED_BY = "hash_count_mismatch_rejected"
ORIGIN = (
    "vLLM v0.22.1 v1/core/encoder_cache_manager.py::check_and_update_cache takes no count "
    "(rejected in v0.33.0 by Scheduler._reject_on_encoder_cache_embed_mismatch)"
)


class AcceptsCountMismatch(EncoderCacheManager):
    def check_and_update_cache(self, request: RequestView, input_id: int) -> bool:
        mm_hash = request.item(input_id).mm_hash
        if mm_hash not in self._cached:
            return False
        self._reference(request, input_id, mm_hash)  # BUG: no count check against the held entry
        return True


ADAPTER = Adapter(name="zoo.ecm_accepts_count_mismatch", encoder_cache_manager=AcceptsCountMismatch)

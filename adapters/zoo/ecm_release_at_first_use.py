"""Drops the reference at the first release of a repeated image, as v0.22.1 does (ECM-6)."""

from __future__ import annotations

from reference.encoder_cache import EncoderCacheManager
from spec.adapter import Adapter
from spec.types import RequestView

BREAKS = "ECM-6"
KILLED_BY = "EncoderCacheMachine"
ORIGIN = (
    "vLLM v0.22.1 v1/core/encoder_cache_manager.py::free_encoder_input discards the request "
    "id at the first release (fixed in v0.33.0 by request_hash_refs)"
)


class ReleaseAtFirstUse(EncoderCacheManager):
    def free_encoder_input(self, request: RequestView, input_id: int) -> None:
        refs = self._refs.get(request.request_id, {})
        if input_id not in refs:
            return
        mm_hash = refs.pop(input_id)
        if not refs:  # (a request with no referenced item keeps nothing: ECM-8 holds)
            self._refs.pop(request.request_id, None)
        holders = self._cached[mm_hash]
        holders.discard(request.request_id)  # BUG: other items of the request still use it
        if not holders:
            self._freeable[mm_hash] = self._num_embeds[mm_hash]


ADAPTER = Adapter(name="zoo.ecm_release_at_first_use", encoder_cache_manager=ReleaseAtFirstUse)

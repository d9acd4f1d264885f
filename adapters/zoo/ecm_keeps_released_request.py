"""A request's bookkeeping outlives its last release: an empty map per request (ECM-8)."""

from __future__ import annotations

from reference.encoder_cache import EncoderCacheManager
from spec.adapter import Adapter

BREAKS = "ECM-8"
KILLED_BY = "EncoderCacheMachine"
ORIGIN = (
    "vLLM v0.33.0 v1/core/encoder_cache_manager.py::free_encoder_input as its mutant "
    "ecm-056 (docs/vllm_mutation.md): `del self.request_cached_ids[req_id]` left out, a "
    "leak per finished request that no other operation shows"
)


class KeepsReleasedRequest(EncoderCacheManager):
    def _release(self, request_id: str, input_ids: list[int]) -> None:
        super()._release(request_id, input_ids)
        self._refs.setdefault(request_id, {})  # BUG: the emptied map is kept


ADAPTER = Adapter(
    name="zoo.ecm_keeps_released_request", encoder_cache_manager=KeepsReleasedRequest
)

"""``check_and_update_cache`` hits when a live allocation carries the item's hash (ECD-3)."""

from __future__ import annotations

from reference.encoder_decoder_cache import EncoderDecoderCacheManager
from spec.adapter import Adapter
from spec.types import RequestView

BREAKS = "ECD-3"
KILLED_BY = "EncoderDecoderCacheMachine"
ORIGIN = (
    "typical student error: the encoder cache manager's hit copied into the "
    "encoder-decoder one, whose outputs the worker drops a step after computing them"
)


class HitOnLiveHash(EncoderDecoderCacheManager):
    def __init__(self, cache_size: int) -> None:
        super().__init__(cache_size)
        self._hashes: dict[tuple[str, int], str] = {}

    def allocate(self, request: RequestView, input_id: int) -> None:
        super().allocate(request, input_id)
        self._hashes[(request.request_id, input_id)] = request.item(input_id).mm_hash

    def check_and_update_cache(self, request: RequestView, input_id: int) -> bool:
        super().check_and_update_cache(request, input_id)
        live = {
            mm_hash
            for (rid, i), mm_hash in self._hashes.items()
            if i in self._allocations.get(rid, {})
        }
        return request.item(input_id).mm_hash in live  # BUG: a hit, as in the encoder cache


ADAPTER = Adapter(name="zoo.ecd_hit_on_live_hash", encoder_decoder_cache_manager=HitOnLiveHash)

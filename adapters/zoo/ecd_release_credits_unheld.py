"""Every release gives back the item's embeddings, whether it holds an allocation or
not, and every item is listed (ECD-2)."""

from __future__ import annotations

from reference.encoder_decoder_cache import EncoderDecoderCacheManager
from spec.adapter import Adapter
from spec.types import RequestView

BREAKS = "ECD-2"
KILLED_BY = "EncoderDecoderCacheMachine"
ORIGIN = (
    "vLLM v0.22.1 and v0.33.0 EncoderDecoderCacheManager (finding V20): "
    "`free_encoder_input` adds `num_encoder_embeds` to `num_free_slots` unconditionally, "
    "`get_cached_input_ids` lists every input and `free` releases every input"
)


class CreditsUnheld(EncoderDecoderCacheManager):
    def __init__(self, cache_size: int) -> None:
        super().__init__(cache_size)
        self._credited = 0

    @property
    def num_free_slots(self) -> int:
        return super().num_free_slots + self._credited

    def free_encoder_input(self, request: RequestView, input_id: int) -> None:
        held = input_id in self._allocations.get(request.request_id, {})
        super().free_encoder_input(request, input_id)
        if not held:
            self._credited += request.item(input_id).num_embeds  # BUG: nothing was charged

    def free(self, request: RequestView) -> None:
        for input_id in range(len(request.items)):
            self.free_encoder_input(request, input_id)

    def get_cached_input_ids(self, request: RequestView) -> set[int]:
        return set(range(len(request.items)))


ADAPTER = Adapter(
    name="zoo.ecd_release_credits_unheld", encoder_decoder_cache_manager=CreditsUnheld
)

"""Charges an allocation its placeholder tokens, not its embeddings (ECD-1)."""

from __future__ import annotations

from reference.encoder_decoder_cache import EncoderDecoderCacheManager
from spec.adapter import Adapter
from spec.types import RequestView

BREAKS = "ECD-1"
KILLED_BY = "EncoderDecoderCacheMachine"
ORIGIN = (
    "typical student error: the placeholder's length for `get_num_embeds()`, the unit "
    "vLLM's encoder cache counted before row encoder_units of adapters/vllm/versions.py"
)


class CountsTokens(EncoderDecoderCacheManager):
    def allocate(self, request: RequestView, input_id: int) -> None:
        super().allocate(request, input_id)
        length = request.item(input_id).mm_position.length
        self._allocations[request.request_id][input_id] = length  # BUG: tokens, not embeddings


ADAPTER = Adapter(name="zoo.ecd_counts_tokens", encoder_decoder_cache_manager=CountsTokens)

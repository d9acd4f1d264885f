"""vLLM's ``EncoderDecoderCacheManager`` behind
``spec.components.EncoderDecoderCacheManager``.

Every operation is the vLLM method of the same name on a vLLM ``Request`` built from the
view (:mod:`adapters.vllm.requests_bridge`); ``num_free_slots`` and ``cache_size`` are
read from vLLM's own attributes, and ``reset`` (ECD-6) is vLLM's. Nothing is translated
but containers (the listing is returned as a copy).
"""

from __future__ import annotations

from collections.abc import Callable

from spec.types import RequestView

from .requests_bridge import RequestBridge
from .versions import VllmCode

#: The class this component wraps, in ``vllm.v1.core.encoder_cache_manager``.
CLASS_NAME = "EncoderDecoderCacheManager"


def has_encoder_decoder_cache(code: VllmCode) -> bool:
    """Whether the loaded release has the class (V1 gave encoder-decoder models one)."""
    return hasattr(code.module("encoder_cache_manager"), CLASS_NAME)


class VllmEncoderDecoderCacheManager:
    """``vllm.v1.core.encoder_cache_manager.EncoderDecoderCacheManager(cache_size)``."""

    def __init__(self, code: VllmCode, cache_size: int) -> None:
        self.vllm = getattr(code.module("encoder_cache_manager"), CLASS_NAME)(cache_size)
        self.requests = RequestBridge(code)

    @property
    def cache_size(self) -> int:
        return int(self.vllm.cache_size)

    @property
    def num_free_slots(self) -> int:
        return int(self.vllm.num_free_slots)

    def check_and_update_cache(self, request: RequestView, input_id: int) -> bool:
        return bool(self.vllm.check_and_update_cache(self.requests(request), input_id))

    def can_allocate(
        self,
        request: RequestView,
        input_id: int,
        encoder_compute_budget: int,
        num_embeds_to_schedule: int,
    ) -> bool:
        return bool(
            self.vllm.can_allocate(
                self.requests(request), input_id, encoder_compute_budget, num_embeds_to_schedule
            )
        )

    def allocate(self, request: RequestView, input_id: int) -> None:
        self.vllm.allocate(self.requests(request), input_id)

    def free_encoder_input(self, request: RequestView, input_id: int) -> None:
        self.vllm.free_encoder_input(self.requests(request), input_id)

    def free(self, request: RequestView) -> None:
        self.vllm.free(self.requests(request))

    def get_cached_input_ids(self, request: RequestView) -> set[int]:
        return {int(i) for i in self.vllm.get_cached_input_ids(self.requests(request))}

    def get_freed_mm_hashes(self) -> list[str]:
        return [str(h) for h in self.vllm.get_freed_mm_hashes()]

    @property
    def reset(self) -> Callable[[], None] | None:
        """vLLM's ``reset`` (ECD-6), or None where the class does not define its own: the
        one it would inherit clears ``EncoderCacheManager``'s maps, which its
        ``__init__`` never creates."""
        if "reset" not in vars(type(self.vllm)):
            return None
        method: Callable[[], None] = self.vllm.reset
        return method

"""vLLM's ``EncoderCacheManager`` behind ``spec.components.EncoderCacheManager``.

Every operation is the vLLM method of the same name on a vLLM ``Request`` built from
the view (:mod:`adapters.vllm.requests_bridge`); the observable state is read from vLLM's own
attributes (``cached``, ``freeable``, ``num_free_slots``, ``num_freeable_slots``), and
so are the optional capabilities ECM-8 and ECM-9 observe (``reset``, the bookkeeping
maps). The only translation is of containers: the state is returned as copies, so a property
holding a snapshot never sees vLLM mutate it later (0.33's ``get_cached_input_ids``
returns its internal set).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from spec.types import RequestView

from .requests_bridge import RequestBridge
from .versions import VllmCode


class VllmEncoderCacheManager:
    """``vllm.v1.core.encoder_cache_manager.EncoderCacheManager(cache_size)``."""

    def __init__(self, code: VllmCode, cache_size: int) -> None:
        self._code = code
        self.vllm = code.module("encoder_cache_manager").EncoderCacheManager(cache_size)
        self.requests = RequestBridge(code)

    # --- observable state ------------------------------------------------------------

    @property
    def cache_size(self) -> int:
        return int(self.vllm.cache_size)

    @property
    def num_free_slots(self) -> int:
        return int(self.vllm.num_free_slots)

    @property
    def num_freeable_slots(self) -> int:
        return int(self.vllm.num_freeable_slots)

    @property
    def cached(self) -> Mapping[str, frozenset[str]]:
        return MappingProxyType({h: frozenset(ids) for h, ids in self.vllm.cached.items()})

    @property
    def freeable(self) -> Mapping[str, int]:
        return OrderedDict(self.vllm.freeable)

    # --- operations ------------------------------------------------------------------

    def check_and_update_cache(self, request: RequestView, input_id: int) -> bool:
        return bool(self.vllm.check_and_update_cache(self.requests(request), input_id))

    def can_allocate(
        self,
        request: RequestView,
        input_id: int,
        encoder_compute_budget: int,
        num_embeds_to_schedule: int,
    ) -> bool:
        # Positional: the last parameter was num_tokens_to_schedule before the cache
        # counted embeddings (versions.py, row encoder_units).
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

    # --- optional capabilities (spec/components.py) ------------------------------------

    @property
    def reset(self) -> Callable[[], None] | None:
        """vLLM's ``reset`` (ECM-9), or None on a release without it."""
        method: Callable[[], None] | None = getattr(self.vllm, "reset", None)
        return method

    def tracked_request_ids(self) -> frozenset[str]:
        """Every request id vLLM's manager keeps state for (ECM-8): in a referencing set,
        or a key of the per-request maps (``request_cached_ids``, ``request_hash_refs``,
        since 0.33)."""
        ids: set[str] = {str(r) for refs in self.vllm.cached.values() for r in refs}
        for name in ("request_cached_ids", "request_hash_refs"):
            ids |= {str(r) for r in getattr(self.vllm, name, {})}
        return frozenset(ids)

    def tracked_mm_hashes(self) -> frozenset[str]:
        """Every hash vLLM's manager keeps per-entry state for (ECM-8): ``cached``,
        ``freeable`` and, since 0.33, ``num_embeds_by_hash`` (``freed``, the drain list,
        is ECM-7's)."""
        hashes: set[str] = set(self.vllm.cached) | set(self.vllm.freeable)
        hashes |= set(getattr(self.vllm, "num_embeds_by_hash", {}))
        return frozenset(str(h) for h in hashes)

    def vllm_request(self, request: RequestView) -> Any:
        """The vLLM ``Request`` this manager uses for ``request`` (the hook passes the
        same object to vLLM's scheduler code)."""
        return self.requests(request)

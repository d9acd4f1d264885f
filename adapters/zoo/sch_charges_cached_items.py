"""Charges items found in the encoder cache against the encoder budget (SCH-2)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.components import EncoderCacheManager
from spec.types import RequestView, ScheduleDecision

BREAKS = "SCH-2"
KILLED_BY = "sch_cached_items_are_free"
ORIGIN = "typical student error: `budget -= num_embeds` before the cache check, so hits are charged"


class _HitCounter:
    """The caller's cache, counting the embeddings of the hits it answers."""

    def __init__(self, cache: EncoderCacheManager) -> None:
        self.cache, self.hit_embeds = cache, 0

    def check_and_update_cache(self, request: RequestView, input_id: int) -> bool:
        hit = self.cache.check_and_update_cache(request, input_id)
        self.hit_embeds += request.items[input_id].num_embeds if hit else 0
        return hit

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cache, name)


class ChargesCachedItems(SchedulingHook):
    def try_schedule_encoder_inputs(
        self,
        request: RequestView,
        num_computed_tokens: int,
        num_new_tokens: int,
        encoder_compute_budget: int,
        cache: EncoderCacheManager,
        shift_computed_tokens: int = 0,
    ) -> ScheduleDecision:
        counter = _HitCounter(cache)
        d = super().try_schedule_encoder_inputs(
            request,
            num_computed_tokens,
            num_new_tokens,
            encoder_compute_budget,
            cast(EncoderCacheManager, counter),
            shift_computed_tokens,
        )
        # BUG: a cache hit costs encoder budget as if it were encoded
        return replace(d, encoder_compute_budget=d.encoder_compute_budget - counter.hit_embeds)


ADAPTER = Adapter(name="zoo.sch_charges_cached_items", scheduling_hook=ChargesCachedItems)

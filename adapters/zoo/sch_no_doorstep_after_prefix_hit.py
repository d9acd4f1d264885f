"""Keeps the chunk when a prefix hit ends inside an unaffordable image (SCH-8)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.components import EncoderCacheManager
from spec.types import RequestView, ScheduleDecision

BREAKS = "SCH-8"
KILLED_BY = "sch_needed_embeddings_available"
ORIGIN = (
    "typical student error: `new = offset - computed` only when computed < offset, keeping "
    "the chunk when a prefix hit ends inside the image"
)


class _RefusalRecorder:
    """The caller's cache, remembering which item ``can_allocate`` refused."""

    def __init__(self, cache: EncoderCacheManager) -> None:
        self.cache, self.refused = cache, -1

    def can_allocate(self, request: RequestView, input_id: int, budget: int, planned: int) -> bool:
        granted = self.cache.can_allocate(request, input_id, budget, planned)
        self.refused = self.refused if granted else input_id
        return granted

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cache, name)


class NoDoorstepAfterPrefixHit(SchedulingHook):
    def try_schedule_encoder_inputs(
        self,
        request: RequestView,
        num_computed_tokens: int,
        num_new_tokens: int,
        encoder_compute_budget: int,
        cache: EncoderCacheManager,
        shift_computed_tokens: int = 0,
    ) -> ScheduleDecision:
        recorder = _RefusalRecorder(cache)
        d = super().try_schedule_encoder_inputs(
            request,
            num_computed_tokens,
            num_new_tokens,
            encoder_compute_budget,
            cast(EncoderCacheManager, recorder),
            shift_computed_tokens,
        )
        k = recorder.refused
        if k >= 0 and request.items[k].mm_position.offset <= num_computed_tokens:
            return replace(d, num_new_tokens=num_new_tokens)  # BUG: should stop at 0
        return d


ADAPTER = Adapter(
    name="zoo.sch_no_doorstep_after_prefix_hit", scheduling_hook=NoDoorstepAfterPrefixHit
)

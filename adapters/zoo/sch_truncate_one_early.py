"""Truncates a chunk one token before an unaffordable item's doorstep (SCH-5)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.components import EncoderCacheManager
from spec.types import RequestView, ScheduleDecision

BREAKS = "SCH-5"
KILLED_BY = "sch_doorstep_truncation"
ORIGIN = (
    "typical student error: `offset - computed - 1` for the doorstep, stalling one token "
    "before the image"
)


class _RefusalRecorder:
    """The caller's cache, remembering whether ``can_allocate`` refused an item."""

    def __init__(self, cache: EncoderCacheManager) -> None:
        self.cache, self.refused = cache, False

    def can_allocate(self, request: RequestView, input_id: int, budget: int, planned: int) -> bool:
        granted = self.cache.can_allocate(request, input_id, budget, planned)
        self.refused |= not granted
        return granted

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cache, name)


class TruncateOneEarly(SchedulingHook):
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
        if recorder.refused and d.num_new_tokens > 0:
            return replace(d, num_new_tokens=d.num_new_tokens - 1)  # BUG: off by one
        return d


ADAPTER = Adapter(name="zoo.sch_truncate_one_early", scheduling_hook=TruncateOneEarly)

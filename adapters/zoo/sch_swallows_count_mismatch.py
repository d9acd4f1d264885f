"""Catches the count mismatch and returns an empty step instead of rejecting (SCH-11)."""

from __future__ import annotations

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.components import EncoderCacheManager
from spec.errors import EmbedCountMismatchError
from spec.types import RequestView, ScheduleDecision

BREAKS = "SCH-11"
KILLED_BY = "sch_count_mismatch_rejected"
ORIGIN = (
    "typical student error: catching the mismatch to keep the scheduling loop alive; "
    "the request is retried with a zero-token step forever instead of failing (vLLM "
    "0.33.0 returns the same empty step but also records the request in "
    "encoder_cache_mismatch_reqs, which fails it)"
)


class SwallowsCountMismatch(SchedulingHook):
    def try_schedule_encoder_inputs(
        self,
        request: RequestView,
        num_computed_tokens: int,
        num_new_tokens: int,
        encoder_compute_budget: int,
        cache: EncoderCacheManager,
        shift_computed_tokens: int = 0,
    ) -> ScheduleDecision:
        try:
            return super().try_schedule_encoder_inputs(
                request,
                num_computed_tokens,
                num_new_tokens,
                encoder_compute_budget,
                cache,
                shift_computed_tokens,
            )
        except EmbedCountMismatchError:
            return ScheduleDecision((), 0, encoder_compute_budget)  # BUG: nobody is told


ADAPTER = Adapter(name="zoo.sch_swallows_count_mismatch", scheduling_hook=SwallowsCountMismatch)

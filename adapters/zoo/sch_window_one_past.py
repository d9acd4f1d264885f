"""Looks one token past the step's window, touching the item right after it (SCH-1)."""

from __future__ import annotations

from dataclasses import replace

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.components import EncoderCacheManager
from spec.types import RequestView, ScheduleDecision

BREAKS = "SCH-1"
KILLED_BY = "sch_only_overlapping_items"
ORIGIN = (
    "typical student error: `offset <= computed + new` for the window end, touching the item "
    "right after the chunk"
)


class WindowOnePast(SchedulingHook):
    def try_schedule_encoder_inputs(
        self,
        request: RequestView,
        num_computed_tokens: int,
        num_new_tokens: int,
        encoder_compute_budget: int,
        cache: EncoderCacheManager,
        shift_computed_tokens: int = 0,
    ) -> ScheduleDecision:
        decision = super().try_schedule_encoder_inputs(
            request,
            num_computed_tokens,
            num_new_tokens + 1,  # BUG: `<=` for `<` at the end
            encoder_compute_budget,
            cache,
            shift_computed_tokens,
        )
        return replace(decision, num_new_tokens=min(decision.num_new_tokens, num_new_tokens))


ADAPTER = Adapter(name="zoo.sch_window_one_past", scheduling_hook=WindowOnePast)

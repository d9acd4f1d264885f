"""The shifted rollback cuts the image before it in half, as vLLM v0.33.0 does (SCH-6)."""

from __future__ import annotations

import reference.scheduling
from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.components import EncoderCacheManager
from spec.types import RequestView, ScheduleDecision

BREAKS = "SCH-6"
KILLED_BY = "sch_no_partial_item_when_disabled"
ORIGIN = (
    "vLLM v0.33.0 v1/core/sched/scheduler.py::_try_schedule_encoder_inputs rolls back to "
    "`max(0, start_pos - (num_computed_tokens + shift_computed_tokens))` and breaks, "
    "without looking at the item scheduled just before (adjacent images, EAGLE shift 1)"
)


def _shifted_rollback(request: RequestView, input_id: int, computed: int, shift: int) -> int:
    # BUG: the drafter shift is subtracted even when that ends inside the previous image
    return max(0, request.items[input_id].mm_position.offset - computed - shift)


class ShiftedRollback(SchedulingHook):
    def try_schedule_encoder_inputs(
        self,
        request: RequestView,
        num_computed_tokens: int,
        num_new_tokens: int,
        encoder_compute_budget: int,
        cache: EncoderCacheManager,
        shift_computed_tokens: int = 0,
    ) -> ScheduleDecision:
        correct = reference.scheduling._rolled_back
        reference.scheduling._rolled_back = _shifted_rollback
        try:
            return super().try_schedule_encoder_inputs(
                request,
                num_computed_tokens,
                num_new_tokens,
                encoder_compute_budget,
                cache,
                shift_computed_tokens,
            )
        finally:
            reference.scheduling._rolled_back = correct


ADAPTER = Adapter(
    name="zoo.sch_rollback_cuts_previous_image", scheduling_hook=ShiftedRollback
)

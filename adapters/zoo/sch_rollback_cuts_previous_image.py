"""The shifted rollback cuts the image before it in half, as vLLM v0.33.0 does (SCH-6)."""

from __future__ import annotations

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.types import RequestView

BREAKS = "SCH-6"
KILLED_BY = "sch_no_partial_item_when_disabled"
ORIGIN = (
    "vLLM v0.33.0 v1/core/sched/scheduler.py::_try_schedule_encoder_inputs rolls back to "
    "`max(0, start_pos - (num_computed_tokens + shift_computed_tokens))` and breaks, "
    "without looking at the item scheduled just before (adjacent images, EAGLE shift 1)"
)


class ShiftedRollback(SchedulingHook):
    @staticmethod
    def rolled_back(request: RequestView, input_id: int, computed: int, shift: int) -> int:
        # BUG: the drafter shift is subtracted even when that ends inside the previous image
        return max(0, request.items[input_id].mm_position.offset - computed - shift)


ADAPTER = Adapter(
    name="zoo.sch_rollback_cuts_previous_image", scheduling_hook=ShiftedRollback
)

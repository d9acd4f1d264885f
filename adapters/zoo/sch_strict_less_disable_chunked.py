"""No rollback for a chunk starting exactly at an item: v0.22.1's `<` (SCH-6)."""

from __future__ import annotations

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.components import EncoderCacheManager
from spec.types import RequestView, ScheduleDecision, SchedulerConfig

BREAKS = "SCH-6"
KILLED_BY = "sch_no_partial_item_when_disabled"
ORIGIN = (
    "vLLM v0.22.1 v1/core/sched/scheduler.py::_try_schedule_encoder_inputs uses "
    "`num_computed_tokens < start_pos` (v0.33.0: `<=`)"
)


class StrictLessDisableChunked(SchedulingHook):
    def try_schedule_encoder_inputs(
        self,
        request: RequestView,
        num_computed_tokens: int,
        num_new_tokens: int,
        encoder_compute_budget: int,
        cache: EncoderCacheManager,
        shift_computed_tokens: int = 0,
    ) -> ScheduleDecision:
        args = (request, num_computed_tokens, num_new_tokens, encoder_compute_budget, cache)
        if any(i.mm_position.offset == num_computed_tokens for i in request.items):
            # BUG: `computed < offset`, not `<=`: a chunk starting at an item is not rolled back
            chunked = SchedulingHook(SchedulerConfig(disable_chunked_mm_input=False))
            return chunked.try_schedule_encoder_inputs(*args, shift_computed_tokens)
        return super().try_schedule_encoder_inputs(*args, shift_computed_tokens)


ADAPTER = Adapter(
    name="zoo.sch_strict_less_disable_chunked", scheduling_hook=StrictLessDisableChunked
)

"""With a drafter shift, the doorstep keeps the look-ahead out of the unaffordable item
even where that leaves 0 tokens, one position before it: the next step is cut to 0
again; in the engine, a request holding the image before it never finishes (SCH-5)."""

from __future__ import annotations

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.components import EncoderCacheManager
from spec.types import RequestView, ScheduleDecision

BREAKS = "SCH-5"
KILLED_BY = "sch_doorstep_truncation"
ORIGIN = (
    "vLLM v0.22.1 v1/core/sched/scheduler.py::_try_schedule_encoder_inputs: when "
    "can_allocate fails, num_new_tokens = start_pos - (num_computed_tokens + "
    "shift_computed_tokens), and 0 once that is not positive (vllm-project/vllm#47738)"
)


class LookaheadDoorstepToZero(SchedulingHook):
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
            request, num_computed_tokens, num_new_tokens, encoder_compute_budget, cache,
            shift_computed_tokens,
        )
        end = num_computed_tokens + decision.num_new_tokens
        if shift_computed_tokens and decision.num_new_tokens < num_new_tokens:
            for item in request.items:
                if item.mm_position.offset == end and end > num_computed_tokens:
                    # BUG: the shifted doorstep, down to 0
                    new = max(0, decision.num_new_tokens - shift_computed_tokens)
                    return ScheduleDecision(
                        decision.encoder_inputs_to_schedule, new,
                        decision.encoder_compute_budget, decision.duplicate_encoder_inputs,
                    )
        return decision


ADAPTER = Adapter(
    name="zoo.sch_lookahead_doorstep_to_zero", scheduling_hook=LookaheadDoorstepToZero
)

"""Encodes repeated content twice in one step instead of reporting a duplicate (SCH-3)."""

from __future__ import annotations

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.components import EncoderCacheManager
from spec.types import RequestView, ScheduleDecision

BREAKS = "SCH-3"
KILLED_BY = "sch_no_duplicate_encode"
ORIGIN = "typical student error: no per-step set of planned hashes (vLLM's mm_hashes_to_schedule)"


class DuplicateEncodedTwice(SchedulingHook):
    def try_schedule_encoder_inputs(
        self,
        request: RequestView,
        num_computed_tokens: int,
        num_new_tokens: int,
        encoder_compute_budget: int,
        cache: EncoderCacheManager,
        shift_computed_tokens: int = 0,
    ) -> ScheduleDecision:
        d = super().try_schedule_encoder_inputs(
            request,
            num_computed_tokens,
            num_new_tokens,
            encoder_compute_budget,
            cache,
            shift_computed_tokens,
        )
        extra = sum(request.items[i].num_embeds for i in d.duplicate_encoder_inputs)
        return ScheduleDecision(  # BUG: no per-step dedup of content
            tuple(sorted(d.encoder_inputs_to_schedule + d.duplicate_encoder_inputs)),
            d.num_new_tokens,
            d.encoder_compute_budget - extra,
        )


ADAPTER = Adapter(name="zoo.sch_duplicate_encoded_twice", scheduling_hook=DuplicateEncodedTwice)

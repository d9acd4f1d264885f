"""Charges only the embeddings the chunk consumes, not the whole item (SCH-4)."""

from __future__ import annotations

from dataclasses import replace

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.components import EncoderCacheManager
from spec.types import RequestView, ScheduleDecision

BREAKS = "SCH-4"
KILLED_BY = "sch_whole_item_charged"
ORIGIN = (
    "typical student error: charging the chunk's share of an image, as if a ViT could encode "
    "half an image"
)


class EncodesOnlyConsumedPart(SchedulingHook):
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
        end = num_computed_tokens + d.num_new_tokens
        refund = 0
        for i in d.encoder_inputs_to_schedule:  # BUG: half an image is "encoded"
            pos = request.items[i].mm_position
            start = max(0, num_computed_tokens - pos.offset)
            first, last = pos.get_embeds_indices_in_range(
                start, max(start, min(pos.length, end - pos.offset))
            )
            refund += request.items[i].num_embeds - (last - first)
        return replace(d, encoder_compute_budget=d.encoder_compute_budget + refund)


ADAPTER = Adapter(
    name="zoo.sch_encodes_only_consumed_part", scheduling_hook=EncodesOnlyConsumedPart
)

"""Raises the budget to the largest item but not the cache size: requests stall (SCH-10)."""

from __future__ import annotations

from collections.abc import Mapping

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.types import EncoderBudgetConfig

BREAKS = "SCH-10"
KILLED_BY = "sch_progress_with_sized_budget"
ORIGIN = (
    "typical student error: half of compute_mm_encoder_budget: the compute budget raised to "
    "the largest item, the cache size left as configured"
)


class CacheNotSized(SchedulingHook):
    def compute_mm_encoder_budget(
        self, config: EncoderBudgetConfig, max_tokens_per_item: Mapping[str, int]
    ) -> tuple[int, int]:
        budget, cache_size = super().compute_mm_encoder_budget(config, max_tokens_per_item)
        return budget, min(cache_size, config.encoder_cache_size)  # BUG: not raised


ADAPTER = Adapter(name="zoo.sch_cache_not_sized", scheduling_hook=CacheNotSized)

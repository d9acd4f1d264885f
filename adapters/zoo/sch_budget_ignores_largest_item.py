"""Sizes encoder budget and cache from the config alone, ignoring the largest item (SCH-9)."""

from __future__ import annotations

from collections.abc import Mapping

from reference.scheduling import SchedulingHook
from spec.adapter import Adapter
from spec.types import EncoderBudgetConfig

BREAKS = "SCH-9"
KILLED_BY = "sch_budget_sizing"
ORIGIN = (
    "typical student error: encoder budget and cache taken from the config as is, without "
    "vLLM's compute_mm_encoder_budget raising them to the largest item"
)


class BudgetIgnoresLargestItem(SchedulingHook):
    def compute_mm_encoder_budget(
        self, config: EncoderBudgetConfig, max_tokens_per_item: Mapping[str, int]
    ) -> tuple[int, int]:
        super().compute_mm_encoder_budget(config, max_tokens_per_item)  # its checks
        if not max_tokens_per_item:
            return 0, 0
        return config.max_num_encoder_input_tokens, config.encoder_cache_size  # BUG


ADAPTER = Adapter(
    name="zoo.sch_budget_ignores_largest_item", scheduling_hook=BudgetIgnoresLargestItem
)

"""The drain reports the hashes allocated in its own step (ECD-5)."""

from __future__ import annotations

from reference.encoder_decoder_cache import EncoderDecoderCacheManager
from spec.adapter import Adapter

BREAKS = "ECD-5"
KILLED_BY = "EncoderDecoderCacheMachine"
ORIGIN = (
    "typical student error: the drain hands the worker the step's own allocations, "
    "which it frees before it stores them -- vLLM's own until #32789 (issue #31577, the "
    "Whisper GPU memory leak)"
)


class ReportsSameStep(EncoderDecoderCacheManager):
    def get_freed_mm_hashes(self) -> list[str]:
        reported, self._allocated_this_step = self._allocated_this_step, []  # BUG: too early
        return reported


ADAPTER = Adapter(
    name="zoo.ecd_reports_same_step", encoder_decoder_cache_manager=ReportsSameStep
)

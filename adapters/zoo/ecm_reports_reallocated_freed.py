"""Reports an evicted hash as freed though it was allocated again before the drain (ECM-7)."""

from __future__ import annotations

from reference.encoder_cache import EncoderCacheManager
from spec.adapter import Adapter

BREAKS = "ECM-7"
KILLED_BY = "EncoderCacheMachine"
ORIGIN = (
    "vLLM v0.22.1 v1/core/encoder_cache_manager.py::get_freed_mm_hashes returns every "
    "evicted hash (v0.33.0 drops those held again)"
)


class ReportsReallocatedFreed(EncoderCacheManager):
    def get_freed_mm_hashes(self) -> list[str]:
        freed = list(dict.fromkeys(self._freed))  # BUG: no filter on hashes held again
        self._freed = []
        return freed


ADAPTER = Adapter(
    name="zoo.ecm_reports_reallocated_freed", encoder_cache_manager=ReportsReallocatedFreed
)

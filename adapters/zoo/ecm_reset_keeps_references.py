"""``reset`` forgets the entries but not the requests' references (ECM-9)."""

from __future__ import annotations

from reference.encoder_cache import EncoderCacheManager
from spec.adapter import Adapter

BREAKS = "ECM-9"
KILLED_BY = "EncoderCacheMachine"
ORIGIN = (
    "vLLM v0.33.0 v1/core/encoder_cache_manager.py::reset as its mutant ecm-004 "
    "(docs/vllm_mutation.md): one of its clear() calls left out, the kind of slip a "
    "field added to the class but not to reset makes"
)


class ResetKeepsReferences(EncoderCacheManager):
    def reset(self) -> None:
        refs = {rid: dict(items) for rid, items in self._refs.items()}
        super().reset()
        self._refs = refs  # BUG: the per-request references survive the reset


ADAPTER = Adapter(
    name="zoo.ecm_reset_keeps_references", encoder_cache_manager=ResetKeepsReferences
)

"""The sender cannot forget a key the engine reported missing (FIC-3)."""

from __future__ import annotations

from reference.item_cache import ItemCache
from spec.adapter import Adapter


class NoInvalidateItemCache(ItemCache):
    def invalidate(self, key: str) -> None:
        return None  # BUG: the shadow keeps the key: every resend omits its data again


BREAKS = "FIC-3"
KILLED_BY = "ItemCacheMachine"
ORIGIN = (
    "vLLM v0.22.1 multimodal/cache.py::MultiModalProcessorSenderCache has no invalidate: a key "
    "the engine lacks stays in P0's shadow until evicted (v0.33.0 LruKeyReplicatedSenderCache."
    "invalidate)"
)
ADAPTER = Adapter(name="zoo.fic_invalidate_noop", item_cache=NoInvalidateItemCache)

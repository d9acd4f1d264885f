"""The engine's item cache asserts on an omitted item it does not hold (FIC-2)."""

from __future__ import annotations

from reference.item_cache import ItemCache, SentItem
from spec.adapter import Adapter
from spec.errors import ItemCacheMissError


class AssertingItemCache(ItemCache):
    def receive(self, items: list[SentItem]) -> list[bytes]:
        try:
            return super().receive(items)
        except ItemCacheMissError as miss:
            # BUG: the drift is treated as impossible; in the engine core this kills it
            raise AssertionError(f"Expected a cached item: {miss}") from None


BREAKS = "FIC-2"
KILLED_BY = "ItemCacheMachine"
ORIGIN = (
    "vLLM v0.22.1 multimodal/cache.py::MultiModalReceiverCache.get_and_update_item: "
    '`assert mm_item is not None, f"Expected a cached item for {mm_hash=}"` in the engine core '
    "(v0.33.0 raises the retryable MultiModalCacheMissError)"
)
ADAPTER = Adapter(name="zoo.fic_miss_asserts", item_cache=AssertingItemCache)

"""The engine's item cache answers with the entry it holds even when a payload was sent
(FIC-1)."""

from __future__ import annotations

from reference.item_cache import ItemCache, SentItem
from spec.adapter import Adapter


class StaleWinsItemCache(ItemCache):
    def receive(self, items: list[SentItem]) -> list[bytes]:
        held = {key: self._payloads[key] for key, _ in items if key in self._payloads}
        resolved = super().receive(items)
        # BUG: "if the item is in the cache, replace the input with the cached item"
        return [held.get(key, got) for (key, _), got in zip(items, resolved, strict=True)]


BREAKS = "FIC-1"
KILLED_BY = "ItemCacheMachine"
ORIGIN = (
    "vLLM v0.22.1 multimodal/cache.py::MultiModalReceiverCache.get_and_update_item returns the "
    "cached item whatever P0 sent (v0.33.0 LruKeyReplicatedReceiverCache keeps the payload sent)"
)
ADAPTER = Adapter(name="zoo.fic_stale_entry_wins", item_cache=StaleWinsItemCache)

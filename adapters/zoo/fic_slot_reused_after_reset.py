"""The request carries a slot number into a store the reset empties; a request waiting
across the reset reads the slot's new occupant (FIC-4)."""

from __future__ import annotations

from reference.item_cache import Item, ItemCache, SentItem
from spec.adapter import Adapter


class SlotReusedAfterReset(ItemCache):
    """The sender writes each payload it passes on into a slot store the receiver reads
    (the request carries the slot number, as vLLM's shared-memory handle names a place
    in its ring); a request's slots are read when it is received."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._slots: list[bytes] = []
        #: per request sent and not yet received: its keys and each item's slot (or None)
        self._pending: list[tuple[list[str], list[int | None]]] = []

    def send(self, items: list[Item]) -> list[bytes | None]:
        sent = super().send(items)
        slots: list[int | None] = []
        for out in sent:
            if out is None:
                slots.append(None)
            else:
                self._slots.append(out)
                slots.append(len(self._slots) - 1)
        self._pending.append(([key for key, _ in items], slots))
        return sent

    def receive(self, items: list[SentItem]) -> list[bytes]:
        keys = [key for key, _ in items]
        index = max(i for i, (sent_keys, _) in enumerate(self._pending) if sent_keys == keys)
        _, slots = self._pending.pop(index)
        read: list[SentItem] = [
            (key, None if slot is None else self._slots[slot])
            for (key, _), slot in zip(items, slots, strict=True)
        ]
        return super().receive(read)

    def clear(self) -> None:
        super().clear()
        # BUG: the slot numbers start again at 0; a request that waits across the reset
        # reads whatever a later request wrote to its slot (or a slot that is gone)
        self._slots.clear()


BREAKS = "FIC-4"
KILLED_BY = "ItemCacheMachine"
ORIGIN = (
    "vLLM v0.22.1 distributed/device_communicators/shm_object_storage.py::"
    "SingleWriterShmRingBuffer.clear restarts the ring's monotonic ids at 0: a request "
    "queued across the API process's cache clear reads another request's item through "
    "its shared-memory handle (docs/findings.md, V31)"
)
ADAPTER = Adapter(name="zoo.fic_slot_reused_after_reset", item_cache=SlotReusedAfterReset)

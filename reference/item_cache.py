"""The front-end item cache (SPEC.md FIC-1..4): the API process's sender half and the
engine core's receiver half of vLLM's multimodal processor cache.

A processed multimodal item crosses from the API process (vLLM's P0) to the engine core
(P1) once: the receiver keeps the payload under the item's key, and the sender keeps a
shadow of the receiver — the keys and their sizes, never the data — so that it can leave
the data out of a later request that carries the same key. Both halves are LRU caches of
the same capacity (bytes; an item weighs its payload's length) and apply the same
operations in the same order, so in lockstep the shadow is exact and the receiver never
misses (FIC-3).

The halves can drift: a request processed in the front end and then dropped before it
reaches the engine (a validation error after processing, an abort) updates the sender
only. The receiver then answers an omitted item it lacks with ``ItemCacheMissError``
(retryable; never an assertion that kills the engine), the engine has the sender
``invalidate`` the key, and the resend carries the data (FIC-2). A payload that is sent
always wins over what the receiver holds under its key (FIC-1): with client-chosen keys
(HASH-7) the same key can arrive with other data, and a stale entry must not pair the new
request's placeholders with the old item. A request received after a reset that came
after its send (it waited in the engine's queue) is served the payloads it carried, as
any other (FIC-4): nothing it reads was kept in a store the reset emptied.

Mirrors vLLM 0.33 ``vllm/multimodal/cache/lru.py``: ``LruKeyReplicatedSenderCache``,
``LruKeyReplicatedReceiverCache`` (``get_and_update_item``, ``invalidate``,
``cache_if_fits``).
"""

from __future__ import annotations

from collections import OrderedDict

from spec.errors import InvalidInputError, ItemCacheMissError


class _Lru:
    """Keys in recency order (oldest first) with their sizes, within a capacity."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.sizes: OrderedDict[str, int] = OrderedDict()

    def touch(self, key: str) -> bool:
        if key not in self.sizes:
            return False
        self.sizes.move_to_end(key)
        return True

    def put(self, key: str, size: int) -> list[str]:
        """Insert ``key`` (most recent), evicting the oldest until it fits; an item
        larger than the whole cache is not kept. Returns the evicted keys."""
        self.sizes.pop(key, None)
        if size > self.capacity:
            return []
        evicted: list[str] = []
        while sum(self.sizes.values()) + size > self.capacity:
            oldest, _ = self.sizes.popitem(last=False)
            evicted.append(oldest)
        self.sizes[key] = size
        return evicted


#: One item of a request: its key and its processed payload.
Item = tuple[str, bytes]
#: One item as it reaches the engine: its key and its payload, or None (omitted).
SentItem = tuple[str, bytes | None]


def _require(items: object, *, omitted_ok: bool) -> None:
    if not isinstance(items, (list, tuple)):
        raise InvalidInputError(f"items must be a sequence, got {type(items).__name__}")
    for index, item in enumerate(items):
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidInputError(f"item {index} must be a (key, payload) pair")
        key, payload = item
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"item {index}'s key must be a non-empty str")
        if payload is None and omitted_ok:
            continue
        if not isinstance(payload, bytes):
            raise InvalidInputError(
                f"item {index}'s payload must be bytes, got {type(payload).__name__}"
            )


class ItemCache:
    """Both halves of the item cache, built from one capacity in bytes. A request's
    items pass the sender (``send``) and then the receiver (``receive``), each touching
    the request's held keys first so that no item of the request evicts another."""

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
            raise InvalidInputError(f"capacity must be an int >= 0, got {capacity!r}")
        self._shadow = _Lru(capacity)  # the sender's: keys and sizes only
        self._held = _Lru(capacity)  # the receiver's recency and sizes
        self._payloads: dict[str, bytes] = {}  # the receiver's data

    # --- the sender (API process) -------------------------------------------------------

    def send(self, items: list[Item]) -> list[bytes | None]:
        """What goes to the engine for each item: nothing when the shadow holds its key
        (the engine has it), else the payload, shadowed as the receiver will keep it."""
        _require(items, omitted_ok=False)
        for key, _ in items:
            self._shadow.touch(key)
        sent: list[bytes | None] = []
        for key, payload in items:
            if self._shadow.touch(key):
                sent.append(None)
            else:
                self._shadow.put(key, len(payload))
                sent.append(payload)
        return sent

    def invalidate(self, key: str) -> None:
        """Forget ``key`` in the shadow: the engine reported it missing."""
        self._shadow.sizes.pop(key, None)

    # --- the receiver (engine core) -----------------------------------------------------

    def receive(self, items: list[SentItem]) -> list[bytes]:
        """Each item's data: the payload sent (kept, replacing any held under its key),
        or for an omitted payload the one held under the key. Items omitted and not
        held raise one ``ItemCacheMissError`` naming every such key, after the others
        were applied (as the engine rejects the request)."""
        _require(items, omitted_ok=True)
        for key, _ in items:
            self._held.touch(key)
        resolved: list[bytes] = []
        missing: list[str] = []
        for key, sent in items:
            if sent is not None:
                self._payloads.pop(key, None)
                for evicted in self._held.put(key, len(sent)):
                    del self._payloads[evicted]
                if key in self._held.sizes:
                    self._payloads[key] = sent
                resolved.append(sent)
            elif self._held.touch(key):
                resolved.append(self._payloads[key])
            else:
                missing.append(key)
        if missing:
            raise ItemCacheMissError(
                f"items {missing} were sent without their data, and the engine does not hold them"
            )
        return resolved

    def clear(self) -> None:
        """Both halves empty (vLLM's ``reset_mm_cache`` clears both)."""
        self._shadow.sizes.clear()
        self._held.sizes.clear()
        self._payloads.clear()

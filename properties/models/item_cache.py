"""The model of the front-end item cache pair (SPEC.md FIC-1..4) that
:mod:`properties.item_cache_machine` runs in lockstep with an implementation.

It does not replay the LRU: FIC fixes what each item resolves to, not which keys stay
held. It records what the receiver was last given under each key (the only data an
omitted item may resolve to, FIC-2: one payload, or more when a request that carried a
new one was rejected on a miss — the engine may have kept it or not — or was dropped
after the sender passed its data on) and which keys a request
dropped between the halves has touched since the engine last resynced them (the only keys
that may miss, FIC-3).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ItemCacheModel:
    capacity: int
    #: key -> the payloads an omitted item may resolve to (what the receiver was last
    #: sent under it; both, after a rejected request sent a new one)
    last_received: dict[str, set[bytes]] = field(default_factory=dict)
    #: keys a dropped request touched in the sender only (the halves may disagree on them)
    drifted: set[str] = field(default_factory=set)

    def may_miss(self, key: str) -> bool:
        return key in self.drifted

    def received(self, key: str, payload: bytes) -> None:
        self.last_received[key] = {payload}

    def maybe_received(self, key: str, payload: bytes) -> None:
        """Sent in a request the receiver rejected on a miss: kept, or not."""
        self.last_received.setdefault(key, set()).add(payload)

    def dropped(self, sent: list[tuple[str, bytes | None]]) -> None:
        """A request dropped between the halves, as the sender passed it on: its keys may
        drift, and a payload the sender passed on may be what the key resolves to later
        (a shared-memory sender has written it where the engine reads: FIC-2)."""
        for key, payload in sent:
            self.drifted.add(key)
            if payload is not None:
                self.last_received.setdefault(key, set()).add(payload)

    def reordered(self, keys: tuple[str, ...]) -> None:
        """A request was received out of the sender's order (it waited across a reset):
        the halves may disagree on any key."""
        self.drifted.update(keys)

    def invalidated(self, key: str) -> None:
        self.drifted.discard(key)

    def cleared(self) -> None:
        self.last_received.clear()
        self.drifted.clear()

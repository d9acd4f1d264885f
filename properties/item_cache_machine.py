"""FIC — the front-end item cache pair as a state machine (SPEC.md FIC-1..4).

Requests of one to three items pass the sender (the API process) and then the receiver
(the engine core), as vLLM passes them; some are dropped between the two (a request
processed in the front end and rejected before it reaches the engine), and the engine
resets both halves. Keys recur, and a key sometimes comes back with other data (a
client reusing its uuid, HASH-7): a stale entry must not win over a payload sent
(FIC-1). :class:`~properties.models.item_cache.ItemCacheModel` says what each item may
resolve to and which keys may miss; every check runs at the operation that promises it.

On a miss the machine does what vLLM 0.33's engine does: the request is rejected, the
sender forgets the keys it omitted (``invalidate``), and the client sends the request
again — which must then be served (FIC-3). A request that carried all its data may also
wait in the engine across a reset while another request passes both halves, and be
received after it (FIC-4): where the receiver resolves a request when it is first
scheduled — vLLM's shared-memory receiver, in the worker — that is a request queued
across a weight update's pause.
"""

from __future__ import annotations

from typing import NoReturn

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from properties.framework import (
    Parts,
    Runnable,
    TransitionRecorder,
    check,
    clause_property,
    machine,
    note,
)
from properties.models.item_cache import ItemCacheModel
from spec.components import ItemCache
from spec.errors import ItemCacheMissError

FIC_CLAUSES = ("FIC-1", "FIC-2", "FIC-3", "FIC-4")

#: Keys recur across requests; each has a usual payload and, sometimes, another one.
KEYS = ("A", "B", "C", "D")
PAYLOADS = {
    key: (key.lower().encode() * size) for key, size in zip(KEYS, (1, 2, 2, 3), strict=True)
}


def _payload_of(key: str, variant: int) -> bytes:
    """The key's usual payload (variant 0), or another of the same or another size."""
    usual = PAYLOADS[key]
    return usual if variant == 0 else bytes([0x30 + variant]) * max(1, len(usual) + variant - 2)


ITEMS = st.lists(
    st.tuples(st.sampled_from(KEYS), st.sampled_from([0, 0, 0, 1, 2, 3])),
    min_size=1,
    max_size=3,
)


def _show(items: list[tuple[str, bytes | None]]) -> str:
    return ", ".join(f"{k}={'(omitted)' if p is None else p!r}" for k, p in items)


def _never_raises(clause: str, call: str, error: Exception, why: str) -> NoReturn:
    """``call`` raised ``error`` where ``clause`` allows no error."""
    check(False, clause, f"{call} raised {type(error).__name__}: {error} — {why}")
    raise AssertionError("unreachable") from error


@clause_property("ItemCacheMachine", FIC_CLAUSES, subject=("item_cache",))
def item_cache_machine(parts: Parts) -> Runnable:
    """FIC-1..4: the pair and the model in lockstep."""
    factory = parts.item_cache

    class ItemCacheMachine(TransitionRecorder, RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.impl: ItemCache | None = None
            self.model = ItemCacheModel(0)

        @initialize(capacity=st.integers(2, 8))
        def setup(self, capacity: int) -> None:
            self.impl = factory(capacity)
            self.model = ItemCacheModel(capacity)
            note(
                f"an item cache of {capacity} bytes in each half; usual payloads "
                + ", ".join(f"{k}={p!r}" for k, p in PAYLOADS.items())
            )

        @property
        def pair(self) -> ItemCache:
            assert self.impl is not None, "setup runs first"
            return self.impl

        def _send(self, items: list[tuple[str, bytes]]) -> list[bytes | None]:
            try:
                sent = list(self.pair.send(items))
            except Exception as error:  # noqa: BLE001 - judged: the sender never fails
                _never_raises(
                    "FIC-1",
                    f"sending {_show(list(items))}",
                    error,
                    "the front end fails the request, and fails it again on every resend",
                )
            check(
                len(sent) == len(items),
                "FIC-1",
                f"the sender returned {len(sent)} items for a request of {len(items)}",
            )
            for (key, payload), out in zip(items, sent, strict=True):
                check(
                    out is None or out == payload,
                    "FIC-1",
                    f"the sender turned item {key}'s payload {payload!r} into {out!r}: the "
                    f"engine would receive data the request did not carry",
                )
            return sent

        def _receive(
            self,
            items: list[tuple[str, bytes]],
            sent: list[bytes | None],
            resend_of: list[str] | None = None,
        ) -> list[str] | None:
            """Receive the sent items; the keys left out of a request that missed (None:
            served). ``resend_of``: the keys invalidated before this resend."""
            wire = [(key, out) for (key, _), out in zip(items, sent, strict=True)]
            try:
                resolved = list(self.pair.receive(wire))
            except ItemCacheMissError as error:
                omitted = [key for key, out in wire if out is None]
                for key, out in wire:
                    if out is not None:
                        self.model.maybe_received(key, out)
                note(f"  the engine reports a miss ({error}); it rejects the request")
                check(
                    resend_of is None,
                    "FIC-3",
                    f"after the engine reported {resend_of} missing and the sender "
                    f"invalidated them, the resend missed again: the request can never be "
                    f"served",
                )
                check(
                    any(self.model.may_miss(key) for key in omitted),
                    "FIC-3",
                    f"the sender omitted the data of {omitted} and the engine lacks some of "
                    f"them, although every request since those keys were last in step "
                    f"passed both halves: the shadow and the engine disagree without a drift",
                )
                return omitted
            except Exception as error:  # noqa: BLE001 - judged: only the miss is allowed
                _never_raises(
                    "FIC-2",
                    f"receiving {_show(wire)}",
                    error,
                    "an item the engine lacks must be a retryable ItemCacheMissError, not an "
                    "error that takes the engine down",
                )
            check(
                len(resolved) == len(items),
                "FIC-1",
                f"the receiver resolved {len(resolved)} items for a request of {len(items)}",
            )
            for (key, payload), out, got in zip(items, sent, resolved, strict=True):
                if out is not None:
                    check(
                        got == payload,
                        "FIC-1",
                        f"item {key} was sent with its payload {payload!r}, but the receiver "
                        f"resolved it to {got!r}: a stale entry won over the data the request "
                        f"carried (the new placeholders are paired with the old item)",
                    )
                    if self.model.last_received.get(key, {payload}) != {payload}:
                        self.reached("resend_replaces")
                    self.model.received(key, payload)
                else:
                    want = self.model.last_received.get(key, set())
                    last = " or ".join(map(repr, sorted(want))) or "none"
                    check(
                        got in want,
                        "FIC-2",
                        f"item {key} was sent without its data and resolved to {got!r}; the "
                        f"payload last sent under that key: {last}",
                    )
                    self.reached("omitted_hit")
            return None

        def _serve(self, items: list[tuple[str, bytes]], sent: list[bytes | None]) -> None:
            """The receiver's half of a request whose sender's half returned ``sent``;
            on a miss, the engine's resync and a resend."""
            missed = self._receive(items, sent)
            if missed is None:
                return
            self.reached("drift_miss")
            for key in missed:
                self.pair.invalidate(key)
                self.model.invalidated(key)
            note(f"  the front end invalidates {missed}; the client resends")
            again = self._send(items)
            note(f"resent {_show(list(zip((k for k, _ in items), again, strict=True)))}")
            self._receive(items, again, resend_of=missed)

        @rule(draw=ITEMS)
        def request(self, draw: list[tuple[str, int]]) -> None:
            """A request passes both halves; on a miss, the engine's resync and a resend."""
            items = [(key, _payload_of(key, variant)) for key, variant in draw]
            sent = self._send(items)
            note(f"request {_show(list(zip((k for k, _ in items), sent, strict=True)))}")
            if any(out is None and self.model.may_miss(k) for (k, _), out in zip(
                items, sent, strict=True
            )):
                self.reached("drift_omitted")
            self._serve(items, sent)

        @rule(draw=ITEMS, between=ITEMS)
        def request_across_reset(
            self, draw: list[tuple[str, int]], between: list[tuple[str, int]]
        ) -> None:
            """A request waits in the engine across its reset (a pause that keeps its
            queue and clears the caches; ``reset_mm_cache`` with requests waiting) while
            another request passes both halves: sent before, received after (FIC-4)."""
            items = [(key, _payload_of(key, variant)) for key, variant in draw]
            sent = self._send(items)
            note(f"request {_show(list(zip((k for k, _ in items), sent, strict=True)))}")
            if any(out is None for out in sent):
                # Only a request that carried all its data waits: an omitted item's
                # fate across a reset is FIC-2's, on the engine's copy.
                self._serve(items, sent)
                return
            waiting = {key for key, _ in items}
            note("  it waits; reset: both halves cleared")
            self.pair.clear()
            self.model.cleared()
            others = [
                (key, _payload_of(key, variant))
                for key, variant in between
                if key not in waiting
            ]
            if others:
                passed = self._send(others)
                note(f"request {_show(list(zip((k for k, _ in others), passed, strict=True)))}")
                self._serve(others, passed)
            note("  the waiting request is received")
            self._receive_after_reset(items)

        def _receive_after_reset(self, items: list[tuple[str, bytes]]) -> None:
            wire: list[tuple[str, bytes | None]] = list(items)
            resolved: list[bytes] | None = None
            try:
                resolved = list(self.pair.receive(wire))
            except ItemCacheMissError as error:
                # Allowed: the engine rejects the request, retryably; the resend, after
                # the keys are invalidated, must then be served (FIC-3).
                keys = [key for key, _ in items]
                note(f"  the engine reports a miss ({error}); the client resends")
                for key in keys:
                    self.pair.invalidate(key)
                    self.model.invalidated(key)
                again = self._send(items)
                self._receive(items, again, resend_of=keys)
            except Exception as error:  # noqa: BLE001 - judged: only the miss is allowed
                _never_raises(
                    "FIC-4",
                    f"receiving {_show(wire)} after the reset it waited across",
                    error,
                    "a request waiting across a reset must be served its data or rejected "
                    "retryably, not take the engine down",
                )
            if resolved is not None:
                check(
                    len(resolved) == len(items),
                    "FIC-4",
                    f"the receiver resolved {len(resolved)} items for a request of "
                    f"{len(items)}",
                )
                for (key, payload), got in zip(items, resolved, strict=True):
                    check(
                        got == payload,
                        "FIC-4",
                        f"item {key} was sent with its payload {payload!r} before the reset "
                        f"and received after it as {got!r}: the waiting request is served "
                        f"another item's data",
                    )
                    self.model.received(key, payload)
                self.reached("served_across_reset")
            # Received out of the sender's order: the halves may now disagree on any key
            # (a later omitted key may miss, retryably: FIC-2, FIC-3).
            self.model.reordered(KEYS)

        @rule(draw=ITEMS)
        def dropped_request(self, draw: list[tuple[str, int]]) -> None:
            """Processed by the front end, rejected before the engine: the sender only."""
            items = [(key, _payload_of(key, variant)) for key, variant in draw]
            sent = self._send(items)
            note(
                f"request {_show(list(zip((k for k, _ in items), sent, strict=True)))} "
                f"is dropped before the engine"
            )
            self.model.dropped(list(zip((key for key, _ in items), sent, strict=True)))

        @precondition(lambda self: bool(self.model.last_received))
        @rule()
        def reset(self) -> None:
            """The engine's ``reset_mm_cache``: both halves empty."""
            note("reset: both halves cleared")
            self.pair.clear()
            self.model.cleared()

    return machine(ItemCacheMachine)

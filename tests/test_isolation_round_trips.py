"""Round trips to the isolated child (issue 31): what a property reads of a component's
state comes back with the call that changed it, and is served from there while nothing
else has been sent — the same values a call would give, fewer round trips."""

from __future__ import annotations

import socket
from collections import Counter

import pytest

from harness.isolation import IsolatedSession, Limits, wire
from harness.isolation.child import _Child
from harness.isolation.session import CALLS_PER_EXCHANGE
from harness.loader import load_adapter
from harness.runner import verify
from properties.framework import answers
from properties.prefix import SEARCH_IMAGES
from spec.types import EngineConfig, EngineRequest


def _session() -> IsolatedSession:
    return IsolatedSession("reference", Limits())


def test_the_engine_snapshot_comes_back_with_the_call_that_changed_it() -> None:
    with _session() as session:
        session.begin_property("test")
        parts = session.parts(load_adapter("reference").adapter)
        engine = parts.engine_loop(EngineConfig(), parts.engine_parts())
        engine.add_request(EngineRequest("r1", (1, 2, 3, 4, 5)))
        served = engine.snapshot()
        again = engine.snapshot()
        assert session.requests["call snapshot"] == 0  # both served with add_request's reply
        assert served == again and served is not again  # each read decoded anew
        parts.hasher().hash_item(b"x" * 64)  # something else reached the child
        asked = engine.snapshot()
        assert session.requests["call snapshot"] == 1
        assert asked == served
        engine.step()
        stepped = engine.snapshot()
        assert session.requests["call snapshot"] == 1
        assert stepped != served


def _round_trips(machine: str) -> Counter[str]:
    """The requests ``machine`` makes of the isolated child in ``ci``, by kind, after
    checking that its report is the one it gives in process."""
    in_process = verify("reference", "ci", [machine])
    with _session() as session:
        isolated = verify("reference", "ci", [machine], session=session)
    assert isolated.rows == in_process.rows
    return session.requests


def test_an_engine_machine_makes_a_fraction_of_the_round_trips_with_the_same_report() -> None:
    """EngineMachine in the ci profile: 31,579 round trips before (12,129 of them
    snapshots; 27 calls a program for SYS-9's fixed checks), now under half; each
    program's images hashed in one exchange (12,739 -> 11,891)."""
    requests = _round_trips("EngineMachine")
    assert requests["call hash_item"] == 0 < requests["call_each hash_item"]
    assert sum(requests.values()) < 12_500, requests.most_common(5)


def test_the_cache_machine_reads_every_listing_in_one_round_trip_with_the_same_report() -> None:
    """EncoderCacheMachine in the ci profile: 52,022 round trips before (18,138 of them
    ``get_cached_input_ids``, one per live request after every step; 16,289 property
    reads served once only; 10,772 bookkeeping queries), now under 16,000."""
    requests = _round_trips("EncoderCacheMachine")
    assert requests["call_each get_cached_input_ids"] > 0
    assert requests["call tracked_mm_hashes"] == 0
    assert sum(requests.values()) < 16_000, requests.most_common(5)


def test_the_encoder_decoder_cache_machine_reads_its_listings_in_one_round_trip() -> None:
    """EncoderDecoderCacheMachine in the ci profile: 20,323 round trips before (16,856 of
    them ``get_cached_input_ids``, one per request in every snapshot and every ECD-2
    check), 9,613 after, with the same report."""
    requests = _round_trips("EncoderDecoderCacheMachine")
    assert requests["call_each get_cached_input_ids"] > 0
    # the ones left one at a time: ECD-2 on the one request about to release (148)
    assert requests["call get_cached_input_ids"] < 1_000, requests.most_common(5)
    assert sum(requests.values()) < 11_000, requests.most_common(5)


class _Listing:
    """Answers ``get_cached_input_ids``, and raises for the request named "bad"."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def get_cached_input_ids(self, request_id: str) -> set[int]:
        self.asked.append(request_id)
        if request_id == "bad":
            raise ValueError("no such request")
        return {len(request_id)}


def test_answers_are_the_calls_a_loop_makes_and_an_error_stands_where_it_was_raised() -> None:
    component = _Listing()
    listings = answers(component.get_cached_input_ids, [("a",), ("bb",), ("bad",), ("ccc",)])
    assert next(listings) == {1}
    assert component.asked == ["a"]  # in process: each call when its answer is taken
    assert next(listings) == {2}
    with pytest.raises(ValueError, match="no such request"):
        next(listings)
    assert component.asked == ["a", "bb", "bad"]


def test_the_child_answers_each_call_in_turn_and_stops_at_the_first_that_raises() -> None:
    near, _far = socket.socketpair()  # no callback is made: nothing crosses it
    child = _Child(near)
    component = _Listing()
    child.handles[1] = component
    each = [wire.to_wire((request_id,)) for request_id in ("a", "bb", "bad", "ccc")]
    kind, replies = child.answer(("call_each", [], 1, "get_cached_input_ids", each))
    assert kind == "ok"
    assert [reply[0] for reply in replies] == ["ok", "ok", "raise"]
    assert [wire.from_wire(reply[1]) for reply in replies[:2]] == [{1}, {2}]
    assert replies[2][1:3] == ("ValueError", "no such request")
    assert component.asked == ["a", "bb", "bad"]  # never the call after the error


def test_the_birthday_search_hashes_its_prompts_in_batches_with_the_same_report() -> None:
    """PFX-5's search hashes 131,072 one-image prompts: one round trip each before (22 s
    of an isolated grade), now one per CALLS_PER_EXCHANGE."""
    in_process = verify("reference", "ci", ["pfx_no_aliasing_by_search"])
    with _session() as session:
        isolated = verify("reference", "ci", ["pfx_no_aliasing_by_search"], session=session)
    assert isolated.rows == in_process.rows
    assert [row.verdict for row in isolated.rows] == ["pass"]
    batches = -(-SEARCH_IMAGES // CALLS_PER_EXCHANGE)
    assert session.requests["call_each request_block_hashes"] == batches
    assert session.requests["call request_block_hashes"] == 0

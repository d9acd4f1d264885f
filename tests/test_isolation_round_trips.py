"""Round trips to the isolated child (issue 31): what a property reads of a component's
state comes back with the call that changed it, and is served from there while nothing
else has been sent — the same values a call would give, fewer round trips."""

from __future__ import annotations

from harness.isolation import IsolatedSession, Limits
from harness.loader import load_adapter
from harness.runner import verify
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


def test_an_engine_machine_makes_a_fraction_of_the_round_trips_with_the_same_report() -> None:
    """EngineMachine in the ci profile: 31,579 round trips before (12,129 of them
    snapshots; 27 calls a program for SYS-9's fixed checks), now under half."""
    in_process = verify("reference", "ci", ["EngineMachine"])
    with _session() as session:
        isolated = verify("reference", "ci", ["EngineMachine"], session=session)
        trips = sum(session.requests.values())
    assert isolated.rows == in_process.rows
    assert trips < 15_000, session.requests.most_common(5)

"""Stand-ins never enter the child (issue 32): the reference's components, standing in
for what a submission lacks, are built and called in the grader's process
(harness/isolation/standins.py), so the submission's process holds no answer key.

The same verdicts as in process, for a scheduling hook alone (handed the grader's cache
manager) and for an engine loop with its own cache manager (the grader's scheduling hook
among its parts, which calls that cache manager back: a request answered while the child
waits for its callback). Both fixtures raise when what they are handed is the
reference's code in their own process: in process they do, isolated they never do. The
grader builds for the child only components the adapter lacks, and answers only calls of
a component's Protocol members.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.grading.reproducer import REFERENCE_LINE, verify_script
from harness.isolation import IsolatedSession, Limits, wire
from harness.isolation.sandbox import SandboxUser
from harness.isolation.standins import StandInChannel, StandIns
from harness.runner import Report, Verdict, verify
from reference.adapter import ADAPTER as REFERENCE
from spec.types import SchedulerConfig


def _verdicts(report: Report) -> dict[tuple[str, str], Verdict]:
    return {(row.clause, row.property): row.verdict for row in report.rows}


@pytest.mark.parametrize(
    "which, only",
    [("HOOK_ALONE", ["SCH-1", "SCH-2", "SCH-4", "SCH-5"]), ("ENGINE_AND_CACHE", ["EngineMachine"])],
    ids=["hook handed the grader's cache manager", "engine given the grader's hook"],
)
def test_a_stand_in_is_the_graders_and_the_verdicts_are_the_same(
    which: str, only: list[str], tmp_path: Path
) -> None:
    ref = _module_for(which, tmp_path)
    in_process = verify(ref, "ci", only)
    # in process the stand-ins are the reference's objects: the fixture's check fires
    assert set(_verdicts(in_process).values()) == {Verdict.ERROR}, _verdicts(in_process)
    assert any("in the submission's process" in f.message
               for r in in_process.results.values() for f in r.failures)
    with IsolatedSession(ref, Limits()) as session:
        isolated = verify(ref, "ci", only, session=session)
    assert set(_verdicts(isolated).values()) == {Verdict.PASS}, _verdicts(isolated)


def _module_for(which: str, folder: Path) -> str:
    """The fixture with ``which`` as its ADAPTER (an adapter module names one)."""
    path = folder / f"{which.lower()}.py"
    path.write_text(
        f"from tests.fixtures.stand_ins_stay_with_the_grader import {which} as ADAPTER\n",
        encoding="utf-8",
    )
    return str(path)


def _held(stand_ins: StandIns, value: object) -> int:
    reference = stand_ins.reference_of(value)
    assert reference is not None and reference[0] == wire.HELD
    return int(reference[1])


def _no_child_proxy(*_args: Any) -> Any:
    raise AssertionError("no child component is named here")


def test_the_grader_builds_only_what_the_adapter_lacks_and_answers_only_its_protocol() -> None:
    assert REFERENCE.scheduling_hook is not None and REFERENCE.encoder_cache_manager
    stand_ins = StandIns({"scheduling_hook": REFERENCE.scheduling_hook})
    # a component the adapter provides is never built for it: it would be graded
    refused = stand_ins.serve(("callback", "build", "encoder_cache_manager", ((4,),)),
                              _no_child_proxy)
    assert refused[0] == "bad", refused
    # nor anything but an engine loop's parts, whatever the adapter lacks
    assert REFERENCE.item_cache is not None
    other = StandIns({"item_cache": REFERENCE.item_cache})
    refused = other.serve(("callback", "build", "item_cache", ((4,),)), _no_child_proxy)
    assert refused[0] == "bad", refused
    built = stand_ins.serve(("callback", "build", "scheduling_hook",
                             wire.to_wire((SchedulerConfig(),))), _no_child_proxy)
    assert built[0] == "ok" and built[1][0] == wire.HELD, built
    cache = stand_ins.tracked("encoder_cache_manager", REFERENCE.encoder_cache_manager)(8)
    number = _held(stand_ins, cache)
    assert stand_ins.serve(("callback", "get", number, "num_free_slots"), _no_child_proxy) \
        == ("ok", 8, ((number, {"num_free_slots": 8}),))
    for member in ("_entries", "__class__", "__dict__", "merge"):
        reply = stand_ins.serve(("callback", "get", number, member), _no_child_proxy)
        assert reply[0] == "bad", (member, reply)
    unknown = stand_ins.serve(("callback", "get", number + 1, "num_free_slots"), _no_child_proxy)
    assert unknown[0] == "bad", unknown
    # a stand-in's own error comes back as the spec's error, for the caller to raise
    raised = stand_ins.serve(
        ("callback", "call", number, "free", wire.to_wire(("no such request",)),
         wire.to_wire({})),
        _no_child_proxy,
    )
    assert raised[:2] == ("raise", "InvalidInputError") and raised[4] is True, raised


def test_a_reproducer_that_needs_the_reference_is_not_run_as_the_sandbox_user() -> None:
    script = f"{REFERENCE_LINE}\nraise SystemExit(1)\n"
    limits = Limits(sandbox=SandboxUser("nobody", 65534, 65534))
    result = verify_script(script, "repro.py", limits)
    assert result.skipped and not result.reproduces
    assert "the sandbox keeps the reference from the submission's user" in result.detail


class _Link:
    """The child's end of the socket, with the grader's StandIns behind it in this
    process: every frame through the wire's own check, the callbacks counted."""

    def __init__(self, stand_ins: StandIns) -> None:
        self.stand_ins = stand_ins
        self.sent: list[str] = []

    def callback(self, *message: Any) -> Any:
        self.sent.append(f"{message[0]} {message[2] if message[0] != 'build' else ''}")
        frame = wire.decode_frame(wire.encode_frame(("callback", *message))[wire.HEADER_SIZE:])
        reply = self.stand_ins.serve(frame, _no_child_proxy)
        return wire.decode_frame(wire.encode_frame(reply)[wire.HEADER_SIZE:])


def test_a_read_comes_with_the_reads_asked_before_and_is_never_stale() -> None:
    """An engine's snapshot reads four members of three stand-ins in a row: after the
    first time, the grader sends them with the first read's reply, and the child answers
    the others from it until it sends the grader anything, or the grader sends it a
    request (the stand-ins may have changed since)."""
    assert REFERENCE.encoder is not None and REFERENCE.worker_store is not None
    stand_ins = StandIns({"encoder": REFERENCE.encoder, "worker_store": REFERENCE.worker_store})
    link = _Link(stand_ins)
    channel = StandInChannel(link, wire.to_wire, lambda data: channel.proxy(data))  # type: ignore[arg-type]
    encoder, store = channel.build("encoder", (4,)), channel.build("worker_store", ())

    def snapshot() -> tuple[int, frozenset[str]]:
        return encoder.num_calls, store.held_hashes()

    link.sent.clear()
    assert snapshot() == (0, frozenset())
    assert link.sent == ["get num_calls", "call held_hashes"]  # nothing asked before
    channel.forget_reads()  # the grader's next request (the child does this first)
    link.sent.clear()
    assert snapshot() == (0, frozenset())
    assert link.sent == ["get num_calls"]  # held_hashes() came with it
    link.sent.clear()
    assert snapshot() == (0, frozenset())
    assert link.sent == []  # nothing sent since, so nothing changed
    encoder.encode(b"image", 2)
    link.sent.clear()
    assert snapshot() == (1, frozenset())  # the call sent: asked again, never stale
    assert link.sent == ["get num_calls"]
    channel.forget_reads()
    link.sent.clear()
    assert store.held_hashes() == frozenset()
    assert link.sent == ["call held_hashes"]


def test_the_child_forgets_the_reads_at_every_request_of_the_graders() -> None:
    """Between two requests the grader may change a stand-in itself (the scheduling
    machines call the cache manager they hand the submission's hook): reads sent before
    a request are never answered after it."""
    import socket

    from harness.isolation.child import _Child

    ours, theirs = socket.socketpair()
    with ours, theirs:
        child = _Child(theirs)
        child.channel._reads = {1: {"num_free_slots": 8}}
        reply = child.serve(("get", [], 99, "num_free_slots"))  # any request at all
        assert reply[0] == "bad" and child.channel._reads == {}, reply

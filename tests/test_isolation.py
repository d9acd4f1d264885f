"""Isolation (harness/isolation/): the wire codec carries plain data only and refuses
the rest, returned values are checked against the Protocols, and grading through the
child gives the same reports as grading in process — for the reference (full marks)
and for zoo entries (the same failures, counterexamples and reproducers)."""

from __future__ import annotations

import dataclasses
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.grading.formats import FORMATS, render
from harness.grading.grade import IN_PROCESS, GradeReport, grade
from harness.grading.rubric import Rubric, load_rubric
from harness.isolation import IsolatedSession, Limits, wire
from harness.isolation.proxy import BadReturnValue, conforms
from harness.loader import AdapterLoadError
from spec.components import EngineSnapshot, RequestSnapshot
from spec.types import (
    MultiModalItem,
    PlaceholderRange,
    ProcessorConfig,
    RequestView,
    RowBreakPolicy,
)
from tests.conftest import FIXTURES, ROOT

RUBRIC = load_rubric()


def _crossed(value: object) -> Any:
    """``value`` sent over the wire and decoded on the other side."""
    frame = wire.encode_frame(wire.to_wire(value))
    return wire.from_wire(wire.decode_frame(frame[wire.HEADER_SIZE :]))


# --- the wire ----------------------------------------------------------------------------


def test_plain_data_and_the_specs_dataclasses_cross_unchanged() -> None:
    view = RequestView(
        "r1",
        (
            MultiModalItem("a", PlaceholderRange(0, 2)),
            MultiModalItem("b", PlaceholderRange(3, 3, (True, False, True))),
        ),
    )
    snapshot = EngineSnapshot(
        requests={"r1": RequestSnapshot("r1", "running", 2, (7,), (0,), (("token", 5),))},
        num_kv_blocks_in_use=1,
        encoder_cache_refs={"a": frozenset({"r1"})},
        encoder_cache_free_slots=3,
        worker_held=frozenset({"a"}),
        encoder_num_calls=1,
    )
    values: list[object] = [
        view,
        ProcessorConfig(policy=RowBreakPolicy(patch_size=8)),
        snapshot,
        [1, (2, "x"), {"k": b"v"}, {1.5, None}, frozenset({True})],
        ("\x00nd", "a user tuple that looks like a tag"),
        # a prompt that is not a list or tuple must reach the processor as it is (EXP-4)
        range(1, 9, 3),
    ]
    for value in values:
        assert _crossed(value) == value
    assert type(_crossed(view)) is RequestView
    assert type(_crossed(range(2))) is range


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.float16).reshape(3, 4),
        np.asfortranarray(np.arange(12, dtype=np.uint8).reshape(3, 4)),
        np.zeros((6, 2), dtype=np.int64)[::2],
        np.zeros((0, 3), dtype=np.float32),
        np.array(True),
    ],
)
def test_arrays_keep_dtype_shape_values_and_layout(array: np.ndarray[Any, Any]) -> None:
    got = _crossed(array)
    assert got.dtype == array.dtype and got.shape == array.shape
    assert np.array_equal(got, array)
    assert got.strides == array.strides  # HASH-1 is about layouts: they must survive


def test_subclasses_of_builtins_arrive_as_the_builtin() -> None:
    class Liar(int):
        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 0

    got = _crossed([Liar(3)])
    assert got == [3] and type(got[0]) is int and got[0] != 4


def test_anything_else_is_refused() -> None:
    with pytest.raises(wire.WireError, match="cannot cross"):
        wire.to_wire(object())
    with pytest.raises(wire.WireError, match="numeric only"):
        wire.to_wire(np.array([object()], dtype=object))
    # the receiver never builds a class a frame names (pickle's only way to run code)
    with pytest.raises(wire.WireError, match="may not name a class"):
        wire.decode_frame(pickle.dumps(RequestView("r", ())))
    with pytest.raises(wire.WireError, match="not a dataclass of the spec"):
        wire.from_wire((wire.DC, "Popen", ("ls",)))
    with pytest.raises(wire.WireError, match="does not match"):
        wire.from_wire((wire.ND, "<f4", (1000, 1000), "C", b"tiny", None))


def test_returned_values_are_checked_against_the_protocol() -> None:
    conforms([np.zeros(2)], list[np.ndarray], "encode_batch")
    conforms((3, np.int64(4)), tuple[int, int], "compute_mm_encoder_budget")
    with pytest.raises(BadReturnValue, match="must be int"):
        conforms("3", int, "num_image_tokens")
    with pytest.raises(BadReturnValue, match=r"\[1\] must be int"):
        conforms((3, "4"), tuple[int, int], "compute_mm_encoder_budget")
    with pytest.raises(BadReturnValue, match="must be bool"):
        conforms(None, bool, "can_allocate")


def test_a_mismatch_deep_in_a_reply_is_located_from_the_outside_in() -> None:
    """Each hint is compiled once into a checker; the path to a mismatch is spelled out
    only when there is one, outermost part first, as the value is written."""
    step = dict[str, tuple[list[int], ...] | None]
    conforms({"a": ([1], [np.int64(2)]), "b": None}, step, "step()")
    with pytest.raises(BadReturnValue) as raised:
        conforms({"a": ([1], [2, "3"])}, step, "step()")
    # The union is where no option fits: the path stops there, the value is the tuple.
    assert str(raised.value).startswith("step()['a'] must be ")
    with pytest.raises(BadReturnValue, match=r"^step\(\)\[0\]\[\.\.\.\] key must be int, "):
        conforms(([{"x": 1}],), tuple[list[dict[int, int]], ...], "step()")


# --- sessions ------------------------------------------------------------------------------


def test_a_malformed_adapter_fails_to_load_in_the_child_with_every_problem() -> None:
    with pytest.raises(AdapterLoadError) as caught:
        IsolatedSession(str(FIXTURES / "many_problems.py"), Limits())
    assert len(caught.value.problems) > 1


@pytest.mark.parametrize(
    "value",
    [
        np.str_("ab\x00"),
        np.bytes_(b"ab\x00"),
        np.float64(0.5),
        np.complex128(1 + 2j),
        np.bool_(True),
        np.int32(-3),
        np.uint8(200),
    ],
    ids=lambda v: type(v).__name__,
)
def test_numpy_scalars_cross_as_themselves(value: object) -> None:
    # issue 15, defect 3: numpy.str_ and numpy.bytes_ are str and bytes a Protocol
    # allows; they arrive as what the grader would have seen in process
    crossed = _crossed(value)
    assert type(crossed) is type(value) and crossed == value


def test_a_frame_that_shares_a_container_is_refused() -> None:
    # issue 15, defect 7: x = [x, x] nested by memo references is a tree of 2**depth
    # leaves for a decoder; a frame is written without the memo, so sharing is forged
    shared: list[object] = []
    for _ in range(40):
        shared = [shared, shared]
    with pytest.raises(wire.WireError, match="may not share a container"):
        wire.decode_frame(pickle.dumps(shared))
    assert _crossed([[1, 2]] * 3) == [[1, 2]] * 3  # what to_wire shares is sent apart


def _shared(depth: int) -> bytes:
    """Pickle opcodes for x = (x, x), ``depth`` times over, by DUP (two bytes a level)."""
    return b"K\x00" + b"2\x86" * depth


def _memo_shared(depth: int) -> bytes:
    """The same by memo references: each level memoized, then read twice."""
    levels = (b"0h%ch%c\x86\x94" % (n - 1, n - 1) for n in range(1, depth))
    return b"K\x00\x94" + b"".join(levels) + b"0h%c" % (depth - 1)


def _colliding(count: int) -> list[bytes]:
    """Pickle opcodes for ``count`` different ints with one hash (multiples of 2**61 - 1)."""
    return [b"\x8a\x0a" + (k * (2**61 - 1)).to_bytes(10, "little") for k in range(count)]


def _reply(value: bytes) -> bytes:
    """A reply frame's payload: ("ok", <what the opcodes value build>)."""
    return b"\x80\x04\x8c\x02ok" + value + b"\x86."


#: Forged replies that pickle would take for ever (or minutes) to build, and the reason
#: each is refused for.
FORGED = {
    "a frozenset of shared tuples": (b"(" + _shared(60) + b"\x91", r"share a container \(DUP\)"),
    "a set of shared tuples": (b"\x8f(" + _shared(60) + b"\x90", r"share a container \(DUP\)"),
    "a dict keyed by shared tuples": (b"}" + _shared(60) + b"Ns", r"share a container \(DUP\)"),
    "a dict keyed by a frozenset of them": (
        b"}(" + _shared(60) + b"\x91Ns", r"share a container \(DUP\)"
    ),
    "shared tuples": (_shared(60), r"share a container \(DUP\)"),
    "a frozenset of memo-shared tuples": (
        b"(" + _memo_shared(60) + b"\x91", r"share a container \(a pickle memo reference\)"
    ),
    "a frozenset of ints with one hash": (
        b"(" + b"".join(_colliding(20_000)) + b"\x91", "may hash only strings"
    ),
    "a dict keyed by ints with one hash": (
        b"}(" + b"N".join(_colliding(50)) + b"Nu", "may hash only strings"
    ),
    "a frozenset of strings built by a memo": (b"(\x8c\x01a\x94\x91", "opcode MEMOIZE"),
    "a popped value": (b"K\x01K\x020", "opcode POP"),
    "a list nested 65 deep": (b"]" * 65 + b"a" * 64, "nested more than 64 deep"),
}


@pytest.mark.parametrize(("value", "reason"), FORGED.values(), ids=list(FORGED))
def test_a_forged_frame_is_refused_before_anything_is_built(
    value: bytes, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 32, item 5: pickle hashes a set's items and a dict's keys as it builds them,
    # so a check of the decoded tree came too late: x = (x, x) sixty deep in a
    # frozenset (131 bytes) kept the grader's decoder busy for ever. Every check of a
    # frame runs on its opcodes, before the unpickler is even made.
    def unpickler(*args: object) -> None:
        raise AssertionError("the frame was unpickled before it was refused")

    monkeypatch.setattr(wire, "PlainUnpickler", unpickler)
    with pytest.raises(wire.WireError, match=reason):
        wire.decode_frame(_reply(value))


def test_forged_frames_are_refused_in_time_bounded_by_their_length() -> None:
    # the same frames, timed for real (in a child, killed at a generous 20 s: the old
    # decoder ran the first for ever, the second for some seven minutes)
    flood = b"".join(_colliding(200_000))
    frames = [_reply(b"(" + _shared(60) + b"\x91"), _reply(b"(" + flood + b"\x91")]
    script = (
        "import sys\n"
        "from harness.isolation import wire\n"
        "for frame in eval(sys.stdin.read()):\n"
        "    try:\n"
        "        wire.decode_frame(frame)\n"
        "    except wire.WireError as e:\n"
        "        print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=repr(frames), capture_output=True, text=True,
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=20, check=True,
    )
    assert done.stdout.splitlines() == [
        "a frame may not share a container (DUP)",
        "a frame may hash only strings (other keys cross tagged)",
    ]


def test_sets_and_dicts_keyed_by_anything_cross_as_themselves() -> None:
    # keys other than strings cross tagged (their hashes are the sender's to choose)
    values: list[object] = [
        {1: "a", (2, 3): [4], None: {5.5}},
        {frozenset({1, (2,)}): frozenset({"s"}), "k": set()},
        {-1, -2, 10**30},
        frozenset({(1, 2), b"x"}),
        {"only": "strings"},
        {"also", "strings"},
    ]
    for value in values:
        got = _crossed(value)
        assert got == value and type(got) is type(value)


def test_a_set_of_keys_with_one_hash_is_refused_before_it_is_built() -> None:
    # ints, floats and tuples hash alike in every process: 200,000 with one hash would
    # take minutes to put in a set; more than a few with one hash are refused
    colliding = tuple(k * (2**61 - 1) for k in range(200_000))
    for tag in (wire.SET, wire.FROZENSET):
        with pytest.raises(wire.WireError, match="more than 8 keys of a set or dict share a hash"):
            wire.from_wire((tag, colliding))
    with pytest.raises(wire.WireError, match="share a hash"):
        wire.from_wire((wire.DICT, colliding, colliding))
    assert wire.from_wire((wire.SET, (3,) * 100 + (-1, -2))) == {3, -1, -2}  # equal: one key


# --- grading: isolated equals in process -------------------------------------------------

_VARYING = re.compile(
    r'( in \d+\.\d s| \d+\.\d s\)|"(execution_time|seconds)": [\d.]+|time="[\d.]+"'
    r'|timestamp="[^"]+"|_Graded in [\d.]+ s\._)'
)


def _same_reports(in_process: GradeReport, isolated: GradeReport) -> None:
    assert in_process.isolation == IN_PROCESS
    assert isolated.isolation == Limits().describe()
    for name in FORMATS:
        a = _VARYING.sub("<t>", render(in_process, name)).replace(IN_PROCESS, "<iso>")
        b = _VARYING.sub("<t>", render(isolated, name)).replace(Limits().describe(), "<iso>")
        assert a == b, name


def _with_one_engine_machine(rubric: Rubric) -> Rubric:
    """``rubric`` with its optional engine item holding SYS-12 alone: grading it runs
    EngineResetMachine only (the one machine that checks SYS-12, and SYS-1..10 with it),
    where the engine items of the default rubric run all five engine machines."""
    items = tuple(
        dataclasses.replace(item, clauses=("SYS-12",)) if "SYS-12" in item.clauses else item
        for item in rubric.items
    )
    return dataclasses.replace(rubric, items=items)


def test_the_reference_scores_full_marks_isolated_with_the_same_reports() -> None:
    # small items of most components, and the engine loop composed in the child from the
    # child's parts (one engine machine: the other four compose the same parts, and
    # tests/test_grading_reproducer_verified.py grades all five isolated); the cache
    # manager's proxies are covered by the zoo test below
    only = ["EXP-4", "ENC-4", "SPL-5", "SCH-9", "WRK-3", "SYS-12"]
    rubric = _with_one_engine_machine(RUBRIC)
    in_process = grade("reference", rubric, "ci", only=only)
    isolated = grade("reference", rubric, "ci", only=only, isolation=Limits())
    ran = {name for result in isolated.items for name in result.properties}
    assert "EngineResetMachine" in ran and "EngineMachine" not in ran, ran
    assert isolated.score == isolated.max_score == in_process.score
    assert isolated.max_score > 0
    _same_reports(in_process, isolated)


@pytest.mark.parametrize(
    ("ref", "only"),
    [
        # the hook in the child, handed the reference's cache manager (also in the child)
        ("adapters/zoo/sch_budget_not_decremented.py", ["SCH-7"]),
        # a view into the store's memory: the grader's writes reach it (write-back)
        ("adapters/zoo/worker_returns_view.py", ["WRK-3"]),
    ],
)
def test_a_zoo_entry_fails_the_same_way_isolated(ref: str, only: list[str]) -> None:
    in_process = grade(ref, RUBRIC, "ci", only=only)
    isolated = grade(ref, RUBRIC, "ci", only=only, isolation=Limits())
    assert isolated.score < isolated.max_score
    assert any(f.reproducer is not None for r in isolated.items for f in r.failures)
    _same_reports(in_process, isolated)


def test_isolated_jobs_each_run_a_child_of_their_own_with_the_same_report() -> None:
    """``grade --jobs 2`` (the default): each forked worker starts its own child, and the
    report — verdicts, counterexamples, reproducers — is the one a single process gives."""
    ref, only = "adapters/zoo/sch_budget_not_decremented.py", ["SCH-7", "SCH-9", "EXP-4"]
    one = grade(ref, RUBRIC, "ci", only=only, isolation=Limits())
    two = grade(ref, RUBRIC, "ci", only=only, isolation=Limits(), jobs=2)
    assert two.score == one.score < one.max_score
    assert any(f.reproducer is not None for r in two.items for f in r.failures)
    for name in FORMATS:
        assert _VARYING.sub("<t>", render(one, name)) == _VARYING.sub("<t>", render(two, name))


def test_an_adapter_that_crashes_its_import_is_a_load_error(tmp_path: Path) -> None:
    crashing = tmp_path / "adapter.py"
    crashing.write_text("import os\nos._exit(7)\n")
    report = grade(str(crashing), RUBRIC, "ci", only=["EXP-4"], isolation=Limits())
    assert report.load_error is not None and report.score == 0
    assert "loading the adapter in the isolated child failed: exited with code 7" in (
        report.load_error
    )


@pytest.mark.parametrize(
    "adapter, has_them",
    [("reference", True), (str(FIXTURES / "from_spec"), False)],
    ids=["reference", "from_spec"],
)
def test_optional_capabilities_are_seen_through_the_child_as_in_process(
    adapter: str, has_them: bool
) -> None:
    """ECM-8/ECM-9's capability probes answer the same isolated (the proxy offers the
    extension members the child's object has) as in process: graded isolated, the
    reference's reset and bookkeeping read `not provided` before (item 26, 0 points)."""
    from harness.loader import build_parts, load_adapter
    from properties.encoder_cache_scenarios import capability_probe

    probes = [capability_probe(("reset",), "ECM-9"),
              capability_probe(("tracked_request_ids", "tracked_mm_hashes"), "ECM-8")]
    in_process = build_parts(load_adapter(adapter).adapter, None)
    with IsolatedSession(adapter, Limits()) as session:
        isolated = session.parts(None)
        for probe in probes:
            assert (probe(isolated) is None) is has_them
            assert (probe(in_process) is None) is has_them

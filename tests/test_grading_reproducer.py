"""The pieces of a reproducer: the comparison runtime, the literals, the call recorder,
the narration filter, and a script built from a real failure that fails on the buggy
implementation and passes on the reference."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.grading.counterexample import narration, numbered, parse_blob
from harness.grading.recording import Call, Construction, Returned, recording_parts
from harness.grading.replay_runtime import (
    CANNOT_RUN,
    CRASHED,
    NOT_REPLAYED,
    PASSED,
    REPRODUCED,
    Labels,
    Mismatch,
    expect,
    normal,
    raises,
    show,
)
from harness.grading.reproducer import (
    ScriptContext,
    Unrenderable,
    Verification,
    _apply,
    _Literals,
    _runtime_source,
    build_script,
    oracle_outcomes,
    verify_script,
)
from harness.loader import build_parts, load_adapter
from spec.errors import SpliceCountError
from spec.types import (
    MultiModalItem,
    PlaceholderRange,
    RequestView,
    ScheduleDecision,
    SchedulerConfig,
)

# --- the runtime's comparison ------------------------------------------------------------


def test_normal_forms_ignore_container_types_but_not_values() -> None:
    assert normal((1, 2)) == normal([1, 2])
    assert normal({"a": {"r1", "r2"}}) == normal({"a": frozenset({"r2", "r1"})})
    assert normal({"a": 1, "b": 2}) == normal({"b": 2, "a": 1})
    assert normal({"a": 1, "b": 2}, "ordered") != normal({"b": 2, "a": 1}, "ordered")
    decision = ScheduleDecision((0,), 5, 3)
    assert normal(decision) == normal(ScheduleDecision((0,), 5, 3, ()))
    assert normal(decision) != normal(ScheduleDecision((0,), 4, 3))


def test_arrays_compare_bit_for_bit() -> None:
    a = np.array([0.0, 1.5], dtype=np.float32)
    assert normal(a) == normal(a.copy())
    assert normal(a) != normal(np.array([-0.0, 1.5], dtype=np.float32)), "sign of zero"
    assert normal(a) != normal(a.astype(np.float16)), "dtype"
    assert normal(a) != normal(a.reshape(2, 1)), "shape"
    nan = np.array([np.nan], dtype=np.float32)
    assert normal(nan) == normal(nan.copy()), "NaN equals itself here"
    big = np.arange(100, dtype=np.int64)
    assert "sha256:" in str(normal(big)) and normal(big) != normal(big[::-1].copy())


def test_opaque_values_compare_by_their_pattern_of_equalities() -> None:
    want, got = Labels(), Labels()
    # The reference's hashes (x, y, x) and an implementation's (p, q, p): same pattern.
    assert [normal(v, "opaque", want) for v in ("x", "y", "x")] == [
        normal(v, "opaque", got) for v in ("p", "q", "p")
    ]
    # A collision where the specification distinguishes: the pattern differs.
    want, got = Labels(), Labels()
    assert [normal(v, "opaque", want) for v in ("x", "y")] != [
        normal(v, "opaque", got) for v in ("p", "p")
    ]


def test_expect_and_raises_report_expected_and_actual() -> None:
    expect(1, "call()", [1, 2], (1, 2))
    with pytest.raises(Mismatch) as caught:
        expect(2, "cache.cached", {"A": set()}, {"B": set()})
    text = str(caught.value)
    assert "step 2: cache.cached" in text
    assert "expects: {'B': set()}" in text and "gave:  {'A': set()}" in text
    with raises(3, "merge()", SpliceCountError):
        raise SpliceCountError("Attempted to assign 1 = 1 multimodal tokens to 2 placeholders")
    with pytest.raises(Mismatch, match="returned without raising"):
        with raises(4, "merge()", SpliceCountError):
            pass
    with pytest.raises(Mismatch, match="raised ValueError"):
        with raises(5, "merge()", SpliceCountError):
            raise ValueError("broadcast")
    assert show(normal({"x": 1}, "ordered")) == "{'x': 1} (in this order)"


# --- literals ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        3,
        -0.5,
        "r1",
        b"\x00\xff",
        (1, "a"),
        [1, [2]],
        {"a": (1,)},
        frozenset({1, 2}),
        set(),
        RequestView("r1", (MultiModalItem("A", PlaceholderRange(1, 2, (True, False))),)),
        ScheduleDecision((0, 1), 7, 0, (1,)),
        np.array([[1, 2], [3, 4]], dtype=np.uint8),
        np.zeros((0, 4), dtype=np.float32),
        np.full((3, 2), 7.5, dtype=np.float16),
        np.arange(300, dtype=np.float32).reshape(30, 10),
        np.array([np.nan, 1.0], dtype=np.float64),
    ],
)
def test_literals_evaluate_back_to_the_same_value(value: Any) -> None:
    literals = _Literals({})
    source = literals.render(value)
    namespace: dict[str, Any] = {"np": np}
    for module, names in literals.imports.items():
        exec(f"from {module} import {', '.join(names)}", namespace)
    assert normal(eval(source, namespace)) == normal(value), source


def test_values_without_a_faithful_literal_are_refused() -> None:
    class Opaque:
        pass

    with pytest.raises(Unrenderable):
        _Literals({}).render(Opaque())


# --- recording ----------------------------------------------------------------------


def test_recording_keeps_top_level_calls_and_reads_only() -> None:
    reference = load_adapter("reference").adapter
    parts, log = recording_parts(build_parts(reference, None))
    cache = parts.encoder_cache_manager(4)
    hook = parts.scheduling_hook(SchedulerConfig())
    request = RequestView("r1", (MultiModalItem("A", PlaceholderRange(0, 2)),))
    decision = hook.try_schedule_encoder_inputs(request, 0, 2, 10, cache)
    assert decision.encoder_inputs_to_schedule == (0,)
    assert cache.num_free_slots == 4
    kinds = [
        (type(e).__name__, e.component if isinstance(e, Construction) else e.member)
        for e in log.entries
    ]
    # The hook's own calls on the cache (can_allocate, ...) are not recorded: replaying
    # the hook makes them again.
    assert kinds == [
        ("Construction", "encoder_cache_manager"),
        ("Construction", "scheduling_hook"),
        ("Call", "try_schedule_encoder_inputs"),
        ("Call", "num_free_slots"),
    ]
    read = log.entries[-1]
    assert isinstance(read, Call) and read.kind == "get" and read.outcome == Returned(4)
    oracle = oracle_outcomes(log, reference)
    assert oracle[2] == Returned(decision) and oracle[3] == Returned(4)


def test_snapshots_do_not_follow_later_mutation() -> None:
    reference = load_adapter("reference").adapter
    parts, log = recording_parts(build_parts(reference, None))
    splice = parts.splice()
    embeds = np.zeros((2, 1), dtype=np.float32)
    splice.merge(embeds, [np.ones((1, 1), dtype=np.float32)], np.array([False, True]))
    embeds[:] = 5.0  # the caller reuses its buffer
    call = log.entries[-1]
    assert isinstance(call, Call)
    assert float(np.asarray(call.args[0]).sum()) == 0.0


def test_the_callers_writes_between_calls_are_recorded_with_their_paths() -> None:
    """A write into a result or into a handed-over buffer between two calls is logged
    before the second; what the call itself changed is not the caller's."""
    reference = load_adapter("reference").adapter
    parts, log = recording_parts(build_parts(reference, None))
    splice = parts.splice()
    embeds = np.zeros((2, 1), dtype=np.float32)
    merged = splice.merge(embeds, [np.ones((1, 1), dtype=np.float32)], np.array([False, True]))
    assert not log.writes, "what merge itself wrote into its argument is its own doing"
    embeds[...] = 5.0  # the caller reuses its buffer
    np.asarray(merged)[...] = 7.0  # and writes into the result it owns
    splice.merge(embeds, [np.ones((1, 1), dtype=np.float32)], np.array([False, True]))
    written = [(w.before, w.origin, w.where, w.path, w.contents.tolist()) for w in log.writes]
    assert written == [
        (2, 1, "args", (("arg", 0),), [[5.0], [5.0]]),
        (2, 1, "result", (), [[7.0], [7.0]]),
    ]
    # the oracle's replay makes the same writes into what crossed on its side
    handed, returned = np.zeros((2, 1), np.float32), np.zeros((2, 1), np.float32)
    crossed: dict[tuple[int, str], object] = {(1, "args"): ([handed], {}), (1, "result"): returned}
    for write in log.writes:
        _apply(write, crossed)
    assert handed.tolist() == [[5.0], [5.0]] and returned.tolist() == [[7.0], [7.0]]


# --- narration ----------------------------------------------------------------------


def test_narration_keeps_the_property_notes_and_drops_hypothesis_bookkeeping() -> None:
    notes = (
        "Failing test case: <state machine>",
        "state = EncoderCacheMachine()",
        "cache of 2 embeddings",
        "state.setup(scenario=Scenario(cache_size=2,\n images=()))",
        "Draw 1 (aim): 0",
        "requests_0 = state.add_request(data=data(...), max_new=1)",
        "request r1 finishes (free); entries A become freeable",
    )
    assert narration(notes) == [
        "cache of 2 embeddings",
        "request r1 finishes (free); entries A become freeable",
    ]
    assert numbered(["a", "  more", "b"]) == ["1. a", "     more", "2. b"]
    only_hypothesis = ("Failing test case: test(\n    case=(b'\\x00', b'\\x01'),\n)",)
    assert narration(only_hypothesis)[0].startswith("Failing test case")


def test_blobs_parse() -> None:
    assert parse_blob("@reproduce_failure('6.170.15', b'AXic')") == ("6.170.15", b"AXic")
    assert parse_blob(None) is None
    assert parse_blob("@reproduce_failure(oops)") is None


# --- a whole script ------------------------------------------------------------------


def _script_for_broadcasting_splice() -> str:
    """Record, by hand, the calls of a splice count-mismatch check on a splice that
    broadcasts a single row (zoo entry spl_broadcast_single_row)."""
    buggy = load_adapter("adapters.zoo.spl_broadcast_single_row")
    reference = load_adapter("reference").adapter
    parts, log = recording_parts(build_parts(buggy.adapter, reference))
    splice = parts.splice()
    splice.merge(
        np.zeros((2, 1), dtype=np.float32),
        [np.ones((1, 1), dtype=np.float32)],
        np.array([True, True]),
    )
    context = ScriptContext(
        item="Done 3",
        property_name="spl_no_broadcast",
        clause_id="SPL-4",
        clause_title="never broadcast, never ignore",
        statement="A count mismatch raises.",
        message="1 row broadcast to 2 placeholders",
        adapter_ref="adapters.zoo.spl_broadcast_single_row",
        command="python -m properties grade ...",
    )
    oracle = oracle_outcomes(log, reference)
    script, steps = build_script(log, oracle, parts.provenance, buggy.name, context)
    assert steps == 1
    return script


def test_a_script_reproduces_on_the_buggy_build_and_passes_on_the_reference() -> None:
    script = _script_for_broadcasting_splice()
    imports = [line for line in script.splitlines() if line.startswith(("import ", "from "))]
    ours = ("hypothesis", "properties", "harness")
    assert not [i for i in imports if any(name in i for name in ours)], imports
    assert "with raises(1, " in script and "SpliceCountError" in script
    buggy = verify_script(script, "repro_test.py")
    assert buggy.reproduces and buggy.step == 1, buggy
    assert "raises SpliceCountError" in buggy.detail
    assert "returned without raising" in buggy.detail
    on_reference = script.replace("'adapters.zoo.spl_broadcast_single_row'", "'reference'")
    fixed = verify_script(on_reference, "repro_test.py")
    assert not fixed.reproduces, fixed


#: Adapters for the outcomes of a reproducer other than REPRODUCED and passing.
_OUTCOME_ADAPTERS = {
    "broken.py": "raise ImportError('no such engine')\n",
    "crashing.py": (
        "from spec.adapter import Adapter\n"
        "def splice():\n"
        "    raise RuntimeError('the splice could not start')\n"
        "ADAPTER = Adapter(name='crashing', splice=splice)\n"
    ),
    "exiting.py": (
        "import sys\n"
        "from spec.adapter import Adapter\n"
        "class Splice:\n"
        "    def merge(self, *args):\n"
        "        sys.exit(0)\n"
        "ADAPTER = Adapter(name='exiting', splice=Splice)\n"
    ),
}


def _run_script(
    script: Path, *args: str, home: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a reproducer as a student would: from its folder, outside the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("MMSPEC_HOME", "PYTHONPATH")}
    env.update({"MMSPEC_HOME": home} if home else {})
    return subprocess.run(
        [sys.executable, str(script), *args], cwd=script.parent, env=env,
        capture_output=True, text=True, timeout=120, check=False,
    )


def test_each_outcome_of_a_reproducer_has_its_own_exit_status(tmp_path: Path) -> None:
    # issue 32, item 4: a reproducer exited 1 for REPRODUCED, for an uncaught traceback
    # and for "not an mmspec checkout"; each outcome now has its own documented status
    script = tmp_path / "repro_test.py"
    script.write_text(_script_for_broadcasting_splice(), encoding="utf-8")
    for name, source in _OUTCOME_ADAPTERS.items():
        (tmp_path / name).write_text(source, encoding="utf-8")
    runs = {
        "reproduced": (_run_script(script), REPRODUCED, "\nREPRODUCED: step 1: "),
        "fixed": (_run_script(script, "reference"), PASSED, "All 1 checked steps gave"),
        "--help": (_run_script(script, "--help"), PASSED, "NOT REPLAYED: a call checked"),
        "two adapters": (_run_script(script, "a.py", "b.py"), CANNOT_RUN, "usage: python"),
        "no checkout": (
            _run_script(script, home=str(tmp_path)), CANNOT_RUN, "is not an mmspec checkout"
        ),
        "an adapter that does not load": (
            _run_script(script, "broken.py"), CANNOT_RUN, "cannot load the adapter 'broken.py'"
        ),
        "a crash outside any step": (
            _run_script(script, "crashing.py"), CRASHED, "RuntimeError: the splice could not"
        ),
        "sys.exit in the implementation": (
            _run_script(script, "exiting.py"), CRASHED, "STOPPED: something called sys.exit()"
        ),
    }
    for outcome, (done, status, says) in runs.items():
        assert done.returncode == status, (outcome, done.stdout[-1500:], done.stderr[-1500:])
        assert says in done.stdout + done.stderr, (outcome, done.stdout[-1500:], done.stderr)
    statuses = (PASSED, REPRODUCED, CANNOT_RUN, CRASHED, NOT_REPLAYED)
    documented = runs["--help"][0].stdout
    assert all(f"\n    {status}  " in documented for status in statuses), documented
    # the fifth: a call checked against the graded run (an engine loop's) gave another value
    diverging = tmp_path / "repro_diverging.py"
    diverging.write_text(
        _runtime_source() + "\ninstall()\n"
        "with as_graded(1, 'engine.step()', ('returns', 1), 'SYS-3: re-encodes A') as got:\n"
        "    got.value = 2\n",
        encoding="utf-8",
    )
    done = _run_script(diverging)
    assert done.returncode == NOT_REPLAYED and "\nNOT REPLAYED: step 1" in done.stderr, done


def test_the_grader_reads_each_status_of_a_reproducer(tmp_path: Path) -> None:
    # what verify_script reports for the outcomes that are not REPRODUCED
    for name, source in _OUTCOME_ADAPTERS.items():
        (tmp_path / name).write_text(source, encoding="utf-8")
    script = _script_for_broadcasting_splice()

    def against(ref: str) -> Verification:
        graded = script.replace("'adapters.zoo.spl_broadcast_single_row'", repr(ref))
        return verify_script(graded, "repro_test.py", cwd=str(tmp_path))

    broken, crashing, exiting = (against(name) for name in _OUTCOME_ADAPTERS)
    assert broken.detail.startswith("did not reproduce: it could not run: cannot load the adapter")
    assert crashing.detail.startswith("did not reproduce: it stopped with RuntimeError: the splice")
    assert exiting.detail.startswith("did not reproduce: it stopped with STOPPED: something")
    assert not any(v.reproduces or v.completed for v in (broken, crashing, exiting))


def test_ordered_dicts_render_as_dicts() -> None:
    assert _Literals({}).render(OrderedDict(a=1)) == "{'a': 1}"

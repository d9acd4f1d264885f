"""The vLLM adapter's engine loop is vLLM's ``Scheduler`` (issue 16), which sizes its own
multimodal budget from the plugin model's processor; a short fixed run
through it in a child process per pinned release, with a profiler on while vLLM's
``schedule()``, ``update_from_output()``, ``finish_requests()``,
``_preempt_request()``, and the scheduler's ``reset_encoder_cache()``,
``reset_prefix_cache()`` and ``set_pause_state()`` (reached through vLLM's
``EngineCore`` functions: SYS-11, SYS-12) run — none of the project's code (the
stand-ins: admission, the model-runner stand-in, the toy encoder) is called from inside
them. The worker store is the adapter's, vLLM's own runner methods
(tests/test_vllm_runner.py).

Skips like tests/test_vllm_adapter.py without vLLM's import chain or release trees
(fails under ``MMSPEC_REQUIRE_VLLM=1``, the CI engine job).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.test_vllm_adapter import PINNED, ROOT, child_env, vllm_tree

#: The child scripts' profiler (this file's and tests/test_vllm_runner.py's): every call
#: into the project's code made while a ``watched`` method runs, and the names of the vLLM
#: functions called (so that an empty list of the first is not a blind profiler).
PROFILER = r"""
ROOT = Path(sys.argv[1]).resolve()
OURS = tuple(str(ROOT / d) for d in ("adapters", "reference", "spec", "properties"))
called = set()
vllm_functions = set()

def profiler(frame, event, arg):
    if event != "call":
        return
    where = frame.f_code.co_filename
    if where.startswith(OURS):
        called.add(f"{Path(where).relative_to(ROOT)}:{frame.f_code.co_name}")
    elif "/vllm/" in where:
        vllm_functions.add(frame.f_code.co_name)

def watched(method):
    def run(*args, **kwargs):
        sys.setprofile(profiler)
        try:
            return method(*args, **kwargs)
        finally:
            sys.setprofile(None)
    return run
"""

_RUN = r"""
import json, sys
from pathlib import Path
import adapters.vllm as a
from reference.adapter import ADAPTER as REF
from spec.adapter import EngineParts
from spec.errors import MissingEmbeddingError
from spec.types import EngineConfig, EngineRequest, MultiModalItem, PlaceholderRange

""" + PROFILER + r"""
parts = EngineParts(
    hasher=a.ADAPTER.hasher, encoder=REF.encoder,
    encoder_cache_manager=a.ADAPTER.encoder_cache_manager,
    scheduling_hook=a.ADAPTER.scheduling_hook, block_hasher=a.ADAPTER.block_hasher,
    worker_store=a.ADAPTER.worker_store,
)
construction = set()

def constructing(frame, event, arg):
    if event == "call":
        construction.add(frame.f_code.co_name)

sys.setprofile(constructing)
engine = a.ADAPTER.engine_loop(EngineConfig(token_budget=8, num_kv_blocks=16), parts)
sys.setprofile(None)
scheduler = engine.scheduler
for name in ("schedule", "update_from_output", "finish_requests", "_preempt_request",
             "reset_encoder_cache", "reset_prefix_cache", "set_pause_state"):
    setattr(scheduler, name, watched(getattr(scheduler, name)))
hasher = a.ADAPTER.hasher()
A, B, C = (bytes([c]) * 16 for c in b"ABC")
def request(rid, second, max_new=2):
    items = (MultiModalItem(hasher.hash_item(A), PlaceholderRange(2, 3)),
             MultiModalItem(hasher.hash_item(second), PlaceholderRange(6, 2)))
    return EngineRequest(rid, (1, 2, 9, 9, 9, 3, 9, 9, 4), items, (A, second), max_new)
chunks = []
def run(steps):
    for _ in range(steps):
        out = engine.step()
        chunks.extend((c.request_id, c.num_computed_tokens, c.num_new_tokens, c.encoder_inputs)
                      for c in out.chunks)
engine.add_request(request("r1", B))
run(3)
engine.add_request(request("r2", C))   # shares A: a prefix hit up to the block before C
engine.add_request(request("r3", B, max_new=3))
run(1)
engine.preempt("r3")
engine.abort("r2")
run(4)
engine.add_request(request("r4", B, max_new=3))
run(1)
resets = [engine.reset_prefix_cache()]   # refused: r4 holds blocks
engine.reset_encoder_cache()             # r4 is decoding: nothing it still needs
engine.update_weights()                  # r4 preempted, caches reset, then resumed
miss = None
try:
    run(6)
except MissingEmbeddingError as e:      # V27 (0.33.0): r4's images were stripped
    miss = str(e)
print(json.dumps({
    "called": sorted(called),
    "vllm_functions": sorted(vllm_functions),
    "chunks": chunks,
    "manager": type(scheduler.encoder_cache_manager).__module__,
    "budget": [scheduler.max_num_encoder_input_tokens,
               scheduler.encoder_cache_manager.cache_size],
    "construction": sorted(construction & {"MultiModalBudget", "__init__", "create_processor",
        "get_mm_max_tokens_per_item", "compute_mm_encoder_budget", "create_manager"}),
    # after a miss the step stopped half-way (the engine core dies there): no snapshot
    "left": sorted(engine.snapshot().requests) if miss is None else None,
    "resets": resets,
    "miss": miss,
}))
"""


def child(
    script: str, version: str, variables: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``script`` run in a child process against the pinned release, with ``variables``
    set in its environment."""
    return subprocess.run(
        [sys.executable, "-c", script, str(ROOT)],
        cwd=ROOT,
        env={**child_env(vllm_tree(version)), **(variables or {})},
        capture_output=True,
        text=True,
    )


def run_child(
    script: str, version: str, variables: dict[str, str] | None = None
) -> dict[str, Any]:
    """:func:`child`, which must succeed; its last line, parsed."""
    completed = child(script, version, variables)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("version", PINNED)
def test_the_engine_loop_is_vllms_scheduler_and_never_calls_a_stand_in(version: str) -> None:
    result = run_child(_RUN, version)
    assert result["called"] == [], "vLLM's scheduler called the project's code"
    # the profiler saw vLLM's own work (so an empty list above is not a blind profiler)
    seen = set(result["vllm_functions"])
    assert {"_try_schedule_encoder_inputs", "_free_encoder_inputs", "allocate_slots",
            "get_freed_mm_hashes", "get_computed_blocks"} <= seen, sorted(seen)
    assert result["manager"] == "vllm.v1.core.encoder_cache_manager"
    # the Scheduler sized its own multimodal budget: MultiModalBudget asked the plugin
    # model's processor for its largest item and ran compute_mm_encoder_budget
    assert result["budget"] == [6, 8]
    assert {"create_processor", "get_mm_max_tokens_per_item",
            "compute_mm_encoder_budget"} <= set(result["construction"])
    chunks = [tuple(c[:3]) for c in result["chunks"]]
    # r1's prefill, with both images encoded; its decode
    assert chunks[:2] == [("r1", 0, 8), ("r1", 8, 1)]
    # r2 reuses r1's blocks up to the one holding C: a prefix hit of 6 tokens (blocks of 2)
    assert ("r2", 6, 3) in chunks
    r2 = next(c for c in result["chunks"] if c[0] == "r2")
    assert r2[3] == [1], "only r2's own image C is encoded"
    # SYS-11/12 through vLLM's EngineCore functions: the scheduler's own resets ran
    assert result["resets"] == [False]
    assert {"reset_encoder_cache", "reset_prefix_cache", "set_pause_state", "reset"} <= seen
    # r4 starts on r1's cached blocks (a hit of 8) and samples; the update preempts it and
    # resets the prefix cache, so it recomputes its 9 prompt tokens and its 1 generated
    # token from 0 (no hit), samples the 2nd, then decodes the 3rd — except on 0.33.0,
    # whose scheduler installed r4 without the data of the images its hit covered, so
    # model runner V1 skips their encodes and the recompute misses (finding V27)
    r4 = [c for c in chunks if c[0] == "r4"]
    if version == "0.33.0":
        assert r4 == [("r4", 8, 1)], r4
        assert str(result["miss"]).startswith("Encoder cache miss for "), result["miss"]
        return
    assert_r4_recomputed(result)


def assert_r4_recomputed(result: dict[str, Any]) -> None:
    """``_RUN``'s r4, preempted by the weight update, recomputed its prompt and its
    generated token from 0, sampled the 2nd and decoded the 3rd: no miss."""
    assert result["miss"] is None
    assert result["left"] == []
    r4 = [tuple(c[:3]) for c in result["chunks"] if c[0] == "r4"]
    assert r4 == [("r4", 8, 1), ("r4", 0, 8), ("r4", 8, 2), ("r4", 10, 1)], r4


#: ``_RUN`` on model runner V2 (``MMSPEC_VLLM_MODEL_RUNNER=v2``): V2's encoder cache and
#: encoder runner, which the worker calls, watched too.
_RUN_V2 = _RUN.replace(
    "scheduler = engine.scheduler\n",
    "scheduler = engine.scheduler\n"
    "store = engine._worker.store\n"
    "for owner, name in ((store.runner, 'prepare_mm_inputs'),"
    " (store.runner, 'execute_mm_encoder'), (store.runner, 'gather_mm_embeddings'),"
    " (store.cache, 'add_request'),"
    " (store.cache, 'remove_request'), (store.cache, 'free_encoder_cache'),"
    " (store.cache, 'update_encoder_inputs'), (store.cache, 'reset_encoder_cache')):\n"
    "    setattr(owner, name, watched(getattr(owner, name)))\n",
    1,
)


def test_on_model_runner_v2_a_resumed_request_is_reinstalled_with_its_data() -> None:
    """0.33.0 on model runner V2, its default (``MMSPEC_VLLM_MODEL_RUNNER=v2``): the
    Scheduler built for V2 and V2's ``EncoderCache``/``EncoderRunner`` behind the worker
    call none of the project's code but the passthrough model; the weight update's
    preemption that makes V1 miss (V27) reinstalls r4 with its data, so r4 recomputes,
    re-encodes and finishes as on 0.22.1."""
    if "0.33.0" not in PINNED:
        pytest.skip("0.33.0 is not pinned")
    result = run_child(_RUN_V2, "0.33.0", {"MMSPEC_VLLM_MODEL_RUNNER": "v2"})
    assert result["called"] == ["adapters/vllm/runner.py:embed_multimodal"], result["called"]
    seen = set(result["vllm_functions"])
    assert {"_try_schedule_encoder_inputs", "_get_encoder_input_updates", "prepare_mm_inputs",
            "execute_mm_encoder", "sanity_check_mm_encoder_outputs", "gather_mm_embeddings",
            "add_request", "remove_request", "reset_encoder_cache"} <= seen, sorted(seen)
    assert_r4_recomputed(result)
    # not vacuous: a worker that keeps a reinstalled request's first features (as V1's
    # runner keeps its request state) misses there, as V1 does
    keeps_first = _RUN_V2.replace(
        "store = engine._worker.store\n",
        "store = engine._worker.store\n"
        "_add = store.cache.add_request\n"
        "first = {}\n"
        "def add_once(req_id, features):\n"
        "    _add(req_id, first.setdefault(req_id, list(features)))\n"
        "store.cache.add_request = add_once\n",
        1,
    )
    mutated = child(keeps_first, "0.33.0", {"MMSPEC_VLLM_MODEL_RUNNER": "v2"})
    missed = "Encoder cache miss for " in mutated.stderr or (
        mutated.returncode == 0 and "Encoder cache miss for " in mutated.stdout
    )
    assert missed, (mutated.returncode, mutated.stderr[-2000:])


_DRAFTER_RUN = _RUN.split("sys.setprofile(constructing)")[0] + r"""
engine = a.ADAPTER.engine_loop(
    EngineConfig(token_budget=8, num_kv_blocks=16, num_speculative_tokens=2), parts
)
scheduler = engine.scheduler
for name in ("schedule", "update_from_output", "update_draft_token_ids"):
    setattr(scheduler, name, watched(getattr(scheduler, name)))
hasher = a.ADAPTER.hasher()
A = b"A" * 16
item = MultiModalItem(hasher.hash_item(A), PlaceholderRange(2, 3))
engine.add_request(EngineRequest("r1", (1, 2, 9, 9, 9, 3, 4), (item,), (A,), 6))
chunks = []
for _ in range(8):
    if "r1" not in engine.snapshot().requests:
        break
    for c in engine.step().chunks:
        chunks.append((c.num_computed_tokens, c.num_new_tokens, c.num_draft_tokens,
                       c.num_accepted_drafts))
print(json.dumps({"called": sorted(called), "vllm_functions": sorted(vllm_functions),
                  "chunks": chunks, "left": sorted(engine.snapshot().requests)}))
"""


@pytest.mark.parametrize(
    ("version", "runner"),
    [(version, "v1") for version in PINNED]
    + [("0.33.0", "v2")] * ("0.33.0" in PINNED),
)
def test_drafts_go_through_vllms_scheduler(version: str, runner: str) -> None:
    """SYS-14 through vLLM's code: the stand-in drafter's proposals reach
    ``Scheduler.update_draft_token_ids``, the scheduler schedules them after the
    request's token and rolls back what the stand-in target rejected; none of it calls
    the project's code — with the Scheduler built for model runner V1, and for V2 with
    V2's encoder cache as the worker's (``MMSPEC_VLLM_MODEL_RUNNER=v2``)."""
    result = run_child(_DRAFTER_RUN, version, {"MMSPEC_VLLM_MODEL_RUNNER": runner})
    assert result["called"] == [], "vLLM's scheduler called the project's code"
    assert "update_draft_token_ids" in result["vllm_functions"]
    # P = 7, k = 2; draft_token_id is wrong where 7 + output index is a multiple of 3.
    # The prefill samples output 0; drafts for outputs 1 (right) and 2 (wrong): one
    # accepted, outputs 1 and 2 sampled, one position rolled back (9 computed); drafts
    # for outputs 3 and 4 (both right): outputs 3, 4, 5, and r1 has its 6
    chunks = [tuple(c) for c in result["chunks"]]
    assert chunks == [(0, 7, 0, 0), (7, 3, 2, 1), (9, 3, 2, 2)], chunks
    assert result["left"] == []


_ASYNC_RUN = _RUN.split("sys.setprofile(constructing)")[0] + r"""
engine = a.ADAPTER.engine_loop(
    EngineConfig(token_budget=4, num_kv_blocks=16, async_scheduling=True), parts
)
scheduler = engine.scheduler
for name in ("schedule", "update_from_output", "_preempt_request", "finish_requests"):
    setattr(scheduler, name, watched(getattr(scheduler, name)))
hasher = a.ADAPTER.hasher()
A = b"A" * 16
item = MultiModalItem(hasher.hash_item(A), PlaceholderRange(2, 3))
engine.add_request(EngineRequest("r1", (1, 2, 9, 9, 9, 3), (item,), (A,), 2))
engine.add_request(EngineRequest("r2", (1, 2, 9, 9, 9, 4), (item,), (A,), 2))
steps = []
def step():
    out = engine.step()
    steps.append([[(c.request_id, c.num_computed_tokens, c.num_new_tokens) for c in out.chunks],
                  [(c.request_id, c.num_computed_tokens, c.num_new_tokens) for c in out.in_flight]])
step()
step()
in_flight = [c[0] for c in steps[-1][1]]
engine.preempt("r2")   # its chunk in flight still executes; its output is dropped
for _ in range(10):
    if not engine.snapshot().requests:
        break
    step()
print(json.dumps({"called": sorted(called), "vllm_functions": sorted(vllm_functions),
                  "scheduler": type(scheduler).__name__, "steps": steps,
                  "preempted_in_flight": in_flight,
                  "left": sorted(engine.snapshot().requests)}))
"""


@pytest.mark.parametrize(
    ("version", "runner"),
    [(version, "v1") for version in PINNED]
    + [("0.33.0", "v2")] * ("0.33.0" in PINNED),
)
def test_async_scheduling_is_vllms_async_scheduler(version: str, runner: str) -> None:
    """SYS-15 through vLLM's code: the engine loop is vLLM's ``AsyncScheduler`` with one
    step in flight — each step schedules the next and executes the one scheduled before
    — and a preemption with a chunk in flight goes through vLLM's own stale-output
    handling; none of it calls the project's code (on model runner V1, and on V2)."""
    result = run_child(_ASYNC_RUN, version, {"MMSPEC_VLLM_MODEL_RUNNER": runner})
    assert result["called"] == [], "vLLM's scheduler called the project's code"
    assert result["scheduler"] == "AsyncScheduler"
    assert {"_update_after_schedule", "_free_encoder_inputs"} <= set(result["vllm_functions"])
    steps = [[[tuple(c) for c in executed], [tuple(c) for c in in_flight]]
             for executed, in_flight in result["steps"]]
    # the first step only schedules; each later one executes what the previous left,
    # r2's chunk in flight at its preemption included
    assert steps[0][0] == [] and steps[0][1]
    for before, after in zip(steps, steps[1:], strict=False):
        assert after[0] == before[1], steps
    assert "r2" in result["preempted_in_flight"], steps
    assert result["left"] == []


_ASYNC_DRAFTER_RUN = _RUN.split("sys.setprofile(constructing)")[0] + r"""
engine = a.ADAPTER.engine_loop(
    EngineConfig(token_budget=8, num_kv_blocks=16, num_speculative_tokens=2,
                 async_scheduling=True), parts
)
scheduler = engine.scheduler
for name in ("schedule", "update_from_output"):
    setattr(scheduler, name, watched(getattr(scheduler, name)))
hasher = a.ADAPTER.hasher()
A = b"A" * 16
item = MultiModalItem(hasher.hash_item(A), PlaceholderRange(2, 3))
engine.add_request(EngineRequest("r1", (1, 2, 9, 9, 9, 3, 4), (item,), (A,), 6))
steps = []
for _ in range(10):
    if not engine.snapshot().requests:
        break
    out = engine.step()
    steps.append([
        [(c.num_computed_tokens, c.num_new_tokens, c.num_draft_tokens, c.num_accepted_drafts)
         for c in out.chunks],
        [(c.num_computed_tokens, c.num_new_tokens, c.num_draft_tokens) for c in out.in_flight],
    ])
print(json.dumps({"called": sorted(called), "vllm_functions": sorted(vllm_functions),
                  "scheduler": type(scheduler).__name__, "steps": steps,
                  "left": sorted(engine.snapshot().requests)}))
"""


@pytest.mark.parametrize("version", PINNED)
def test_async_drafts_go_through_vllms_async_scheduler(version: str) -> None:
    """SYS-15 with a drafter through vLLM's code: the ``AsyncScheduler`` schedules
    placeholder drafts one step ahead; the runner stand-in fills them and executes each
    chunk where the previous step's rejections put it, which is where ``in_flight``
    said it would; none of it calls the project's code."""
    result = run_child(_ASYNC_DRAFTER_RUN, version)
    assert result["called"] == [], "vLLM's scheduler called the project's code"
    assert result["scheduler"] == "AsyncScheduler"
    assert "_update_after_schedule" in result["vllm_functions"]
    steps = [[[tuple(c) for c in executed], [tuple(c) for c in in_flight]]
             for executed, in_flight in result["steps"]]
    for before, after in zip(steps, steps[1:], strict=False):
        assert [c[:3] for c in after[0]] == before[1], steps
    executed = [c for s in steps for c in s[0]]
    # P = 7, k = 2; draft_token_id is wrong where 7 + output index is a multiple of 3:
    # the first decode verifies drafts for outputs 1 (right) and 2 (wrong), scheduled
    # at 7 while the prefill was in flight; one is rejected, so the next chunk,
    # scheduled at 10 as if both were accepted, executes at 9
    assert executed[0] == (0, 7, 0, 0), executed
    assert executed[1] == (7, 3, 2, 1), executed
    assert executed[2][0] == 9, executed
    assert result["left"] == []


"""The vLLM adapter's worker store is vLLM's model runner (issue 35): a short fixed run of
store, gather, free and miss in a child process per pinned release, with a profiler on
while the runner's own methods run — ``_execute_mm_encoder``, ``_gather_mm_embeddings``
(0.33.0) ``_process_encoder_cache_scheduler_output`` and ``reset_encoder_cache`` — showing
that they call none of the project's code but the two stand-ins listed in
``adapters/vllm/runner.py`` (the passthrough model's ``embed_multimodal``, the
late-interaction runner's ``clear``), and that the rows they serve are the stored ones;
and finding V25's reproducer on each release. The same for model runner V2's
``EncoderCache`` and ``EncoderRunner`` behind the store (``MMSPEC_VLLM_MODEL_RUNNER=v2``,
``adapters/vllm/runner_v2.py``), whose one stand-in called is the passthrough model.

Skips like tests/test_vllm_adapter.py without vLLM's import chain or release trees
(fails under ``MMSPEC_REQUIRE_VLLM=1``, the CI engine job).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_vllm_adapter import PINNED, ROOT, child_env, vllm_tree
from tests.test_vllm_engine import PROFILER, run_child

#: Two steps every store runs: A and B stored, then gathered over two chunks.
_TWO_STEPS = r"""
A = np.arange(12, dtype=np.float32).reshape(4, 3)          # 4 embeddings
B = 100 + np.arange(6, dtype=np.float32).reshape(2, 3)     # 2 embeddings, 3 positions
a_range = PlaceholderRange(2, 4)
b_range = PlaceholderRange(7, 3, (True, False, True))
def g(rid, h, rng, s, e):
    return GatherSpec(rid, h, rng, s, e)
rows = []
# step 1: both encoded; the chunk [0, 5) gathers A's first three rows
rows += store.execute_step(WorkerStep((), {"A": A, "B": B}, (g("r", "A", a_range, 0, 3),)))
# step 2: the chunk [5, 10) gathers A's last row and B's two (its middle position has none)
rows += store.execute_step(WorkerStep((), {}, (g("r", "A", a_range, 3, 4),
                                                g("r", "B", b_range, 0, 3))))
held_before = sorted(store.held_hashes())
"""

#: Then A freed and a gather of it missing; C stored and a weight update's reset.
_MISS_AND_RESET = r"""
store.execute_step(WorkerStep(("A",), {}, ()))
try:
    store.execute_step(WorkerStep((), {}, (g("s", "A", a_range, 0, 4),)))
    miss = None
except MissingEmbeddingError as e:
    miss = str(e)
store.execute_step(WorkerStep((), {"C": A}, ()))
held_before_reset = sorted(store.held_hashes())
store.reset_encoder_cache()
"""

_RUN = r"""
import json, sys
from pathlib import Path
import numpy as np
import adapters.vllm as a
from spec.errors import MissingEmbeddingError
from spec.types import GatherSpec, MultiModalItem, PlaceholderRange, WorkerStep

""" + PROFILER + r"""
store = a.ADAPTER.worker_store()
runner = store._runner
for name in ("_execute_mm_encoder", "_gather_mm_embeddings",
             "_process_encoder_cache_scheduler_output", "reset_encoder_cache"):
    if hasattr(runner, name):
        setattr(runner, name, watched(getattr(runner, name)))

""" + _TWO_STEPS + r"""
# the drafter's look-ahead over the chunk [0, 2) reaches Z at 2, never encoded
try:
    z = MultiModalItem("Z", PlaceholderRange(2, 2))
    look_ahead = [len(store.draft_gather("d", 0, 2, (z,)))]
except MissingEmbeddingError as e:
    look_ahead = str(e)
""" + _MISS_AND_RESET + r"""print(json.dumps({
    "called": sorted(called),
    "vllm_functions": sorted(vllm_functions),
    "rows": [r.tolist() for r in rows],
    "expected": [A[:3].tolist(), A[3:].tolist(), B.tolist()],
    "held": [held_before, held_before_reset, sorted(store.held_hashes())],
    "miss": miss,
    "look_ahead": look_ahead,
}))
"""


@pytest.mark.parametrize("version", PINNED)
def test_the_worker_store_is_vllms_runner_and_calls_only_its_listed_stand_in(
    version: str,
) -> None:
    result = run_child(_RUN, version)
    # the stand-ins vLLM's code calls: the model's embed_multimodal, and the
    # late-interaction runner's clear in reset_encoder_cache
    assert result["called"] == [
        "adapters/vllm/runner.py:clear",
        "adapters/vllm/runner.py:embed_multimodal",
    ], result["called"]
    seen = set(result["vllm_functions"])
    # the profiler saw vLLM's own encode path and gather (so the list above is not blind)
    assert {
        "_batch_mm_inputs_from_scheduler",
        "group_and_batch_mm_kwargs",
        "sanity_check_mm_encoder_outputs",
        "get_embeds_indices_in_range",
    } <= seen, seen
    if version != "0.22.1":
        assert {"_process_encoder_cache_scheduler_output", "_cache_encoder_output"} <= seen
    assert result["rows"] == result["expected"]
    assert result["held"] == [["A", "B"], ["B", "C"], []]
    assert result["miss"] == "Encoder cache miss for A."
    # the drafter's gather is the release's: 0.33.0 falls back to token embeddings for an
    # item starting where the chunk ends, 0.22.1 asserts (finding V22)
    assert result["look_ahead"] == (
        "Encoder cache miss for Z." if version == "0.22.1" else [0]
    )


_RUN_V2 = r"""
import json, sys
from pathlib import Path
import numpy as np
import adapters.vllm as a
from spec.errors import MissingEmbeddingError
from spec.types import GatherSpec, PlaceholderRange, WorkerStep

""" + PROFILER + r"""
store = a.ADAPTER.worker_store()
runner, cache = store.runner, store.cache
state = a.CODE.module("v2_model_state").ModelState
if hasattr(state, "execute_mm_encoder"):  # 0.33.0: the model state's encode-and-store
    state.execute_mm_encoder = watched(state.execute_mm_encoder)
else:  # 0.22.1: the runner's two steps, called by the store's three lines
    runner.prepare_mm_inputs = watched(runner.prepare_mm_inputs)
    runner.execute_mm_encoder = watched(runner.execute_mm_encoder)
runner.gather_mm_embeddings = watched(runner.gather_mm_embeddings)
cache.free_encoder_cache = watched(cache.free_encoder_cache)
cache.reset_encoder_cache = watched(cache.reset_encoder_cache)

""" + _TWO_STEPS + r"""
# A stored again with other rows: 0.33.0's prepare_mm_inputs skips a held hash
again = store.execute_step(WorkerStep((), {"A": A + 1}, (g("r", "A", a_range, 0, 4),)))
""" + _MISS_AND_RESET + r"""print(json.dumps({
    "called": sorted(called),
    "vllm_functions": sorted(vllm_functions),
    "rows": [r.tolist() for r in rows],
    "expected": [A[:3].tolist(), A[3:].tolist(), B.tolist()],
    "again": again[0].tolist(),
    "held": [held_before, held_before_reset, sorted(store.held_hashes())],
    "miss": miss,
}))
"""


@pytest.mark.parametrize("version", PINNED)
def test_model_runner_v2_behind_the_worker_store_calls_only_its_listed_stand_in(
    version: str,
) -> None:
    """``MMSPEC_VLLM_MODEL_RUNNER=v2``: the store is V2's ``EncoderCache`` and
    ``EncoderRunner`` (adapters/vllm/runner_v2.py), whose code calls none of ours but
    the passthrough model's ``embed_multimodal``, serves the stored rows, and — on
    0.33.0 — keeps what it holds for a hash stored again."""
    result = run_child(_RUN_V2, version, {"MMSPEC_VLLM_MODEL_RUNNER": "v2"})
    assert result["called"] == ["adapters/vllm/runner.py:embed_multimodal"], result["called"]
    seen = set(result["vllm_functions"])
    assert {
        "prepare_mm_inputs",
        "group_and_batch_mm_kwargs",
        "sanity_check_mm_encoder_outputs",
        "gather_mm_embeddings",
        "get_embeds_indices_in_range",
        "free_encoder_cache",
        "reset_encoder_cache",
    } <= seen, seen
    if version != "0.22.1":
        assert "get_mm_features_in_window" in seen
    assert result["rows"] == result["expected"]
    a_rows = [[float(x) for x in row] for row in result["expected"][0] + result["expected"][1]]
    assert result["again"] == (
        [[x + 1 for x in row] for row in a_rows] if version == "0.22.1" else a_rows
    )
    assert result["held"] == [["A", "B"], ["B", "C"], []]
    assert result["miss"] == "Encoder cache miss for A."


_REPRO_V25 = ROOT / "adapters" / "vllm" / "repro_unchecked_rows.py"


def _run_repro(script: Path, version: str) -> subprocess.CompletedProcess[str]:
    """A finding's reproducer, as docs/findings.md says to run it, on ``version``."""
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=child_env(vllm_tree(version)),
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize("version", PINNED)
def test_v25_the_runner_gathers_a_mis_sized_output_unchecked(version: str) -> None:
    """Finding V25 through vLLM's own runner methods (docs/findings.md): an image of 4
    placeholders whose model returns 6 rows is served its first 4 without an error; one
    whose model returns 3 is served 3, and only the splice's count check stops it."""
    completed = _run_repro(_REPRO_V25, version)
    assert completed.returncode == 1, completed.stderr[-3000:]
    facts = json.loads(completed.stdout.strip().splitlines()[-1])
    assert facts["long"] == {
        "rows_held": 6,
        "gather_error": None,
        "rows_served": 4,
        "placeholders": 4,
        "splice_error": None,
    }
    assert facts["short"]["rows_served"] == 3 and facts["short"]["gather_error"] is None
    assert facts["short"]["splice_error"] == (
        "Attempted to assign 3 = 3 multimodal tokens to 4 placeholders"
    )


_REPRO_V27 = ROOT / "adapters" / "vllm" / "repro_stripped_resume.py"


@pytest.mark.parametrize("version", PINNED)
def test_v27_a_resumed_request_misses_the_data_its_prefix_hit_stripped(version: str) -> None:
    """Finding V27 through vLLM's Scheduler and model runner V1 (docs/findings.md): a
    request installed with its image covered by a prefix hit (0.33.0 strips the image's
    data), preempted, the prefix cache reset: the resumed request's encode of the image
    is skipped by the runner, and its gather misses. 0.22.1 strips nothing."""
    completed = _run_repro(_REPRO_V27, version)
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = completed.stdout.strip().splitlines()
    facts = json.loads(lines[-1])
    assert "r2 computes [4, 6) (prefix hit past A)" in lines, lines
    assert "r2 preempted; reset_prefix_cache() -> True" in lines, lines
    if version == "0.22.1":
        assert facts == {"encoder_cache_miss": False, "error": ""}, lines
        assert "r2 computes [0, 7) encoding [0]" in lines and "r2 finished" in lines, lines
    else:
        assert facts["encoder_cache_miss"] is True, lines
        assert facts["error"].startswith("Encoder cache miss for "), facts


_REPRO_MAMBA = ROOT / "adapters" / "vllm" / "repro_mamba_alignment.py"


@pytest.mark.parametrize("version", PINNED)
def test_v28_to_v30_a_hybrid_models_chunks_through_vllms_scheduler(version: str) -> None:
    """Findings V28, V29 and V30 through vLLM's Scheduler with a Mamba group in "align"
    mode (docs/findings.md). 0.22.1 aligns after the hook: the chunk stopped at B's
    doorstep inside a block floors to nothing for good (#40707), a budget smaller than a
    block computes nothing ever, and an image that must stay whole is split; its last
    stop leaves a repeated prompt no state to resume from. 0.33.0 fixes those, but its
    alignment ends the chunk inside an image that must stay whole, and the rollback to
    the image's offset leaves nothing, at every step."""
    completed = _run_repro(_REPRO_MAMBA, version)
    assert completed.returncode == 0, completed.stderr[-3000:]
    facts = json.loads(completed.stdout.strip().splitlines()[-1])
    if version == "0.22.1":
        assert facts["doorstep"] == {"finished": [], "chunks": [["r1", 0, 8]]}, facts
        assert facts["small_budget"] == {"finished": [], "chunks": []}, facts
        assert facts["whole_image"]["splits_the_image"] is True, facts
        assert facts["repeat"]["prefix_hit"] == 0, facts
    else:
        assert facts["doorstep"]["finished"] == ["r1"], facts
        assert facts["small_budget"]["finished"] == ["r1"], facts
        assert facts["whole_image"] == {
            "finished": [], "chunks": [], "splits_the_image": False
        }, facts
        assert facts["repeat"]["prefix_hit"] == 2, facts


_REPRO_SHM = ROOT / "adapters" / "vllm" / "repro_shm_reset.py"


@pytest.mark.parametrize("version", PINNED)
def test_v31_a_request_waiting_across_a_cache_clear_reads_a_recycled_shm_slot(
    version: str,
) -> None:
    """Finding V31 through vLLM's shared-memory processor cache pair (docs/findings.md): a
    request sent before the sender's clear and read by the worker after a later request's
    item was written — 0.22.1 serves it the later request's image, 0.33.0 raises in the
    worker's read (the engine core stops)."""
    completed = _run_repro(_REPRO_SHM, version)
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = completed.stdout.strip().splitlines()
    facts = json.loads(lines[-1])
    assert "r2 (image A) sent and scheduled: the worker reads b'aaaa'" in lines, lines
    if version == "0.22.1":
        assert facts == {"served": "aaaa", "wrong_image": True, "error": ""}, lines
    else:
        assert facts["served"] is None and facts["wrong_image"] is False, facts
        assert facts["error"].startswith("ValueError: Data for address:id"), facts

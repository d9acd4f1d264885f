"""Finding V26 through vLLM's own ``Scheduler`` and model-runner code (docs/findings.md):
0.33.0's scheduler installs a request on the worker without the data of the items its
prefix hit covers (``NewRequestData.from_request`` → ``strip_covered_mm_data``); model
runner V1 keeps those ``mm_features`` for the request's life, and when the request is
preempted and resumed it is not installed again (``CachedRequestData.resumed_req_ids``).
If the resumed request must compute the item again — the prefix cache was reset
(``reset_prefix_cache``, as around a weight sync) or its blocks were evicted, and the
encoder cache no longer holds the item — the scheduler schedules the item's encode, the
runner skips it (``_batch_mm_inputs_from_scheduler``: ``if mm_feature.data is None:
continue``) and its gather raises ``Encoder cache miss``, which stops the engine core.

    MMSPEC_VLLM_SRC=.vllm-cache/vllm-0.33.0 PYTHONPATH=. .venv-vllm/bin/python \\
        adapters/vllm/repro_stripped_resume.py

The engine loop is the vLLM adapter's: vLLM's ``Scheduler`` built for model runner V1
(``VLLM_USE_V2_MODEL_RUNNER=0``), its worker store vLLM's ``GPUModelRunner`` methods
(``_batch_mm_inputs_from_scheduler``, ``_execute_mm_encoder``,
``_gather_mm_embeddings``), the engine core's own ``reset_encoder_cache`` and
``reset_prefix_cache``. Image ``A`` fills positions 0..2 of both prompts (blocks of 2):
``r1`` = ``A 5 6`` runs and finishes; the encoder cache is reset; ``r2`` = ``A 5 6 7``
hits blocks 0..1 (4 tokens, past ``A``), so ``A`` reaches the worker without data;
``r2`` computes ``[4, 6)``, is preempted, the prefix cache is reset, and the next step
schedules ``A``'s encode for ``r2`` from position 0. 0.22.1 strips nothing: the same
steps run to the end.

Prints each step's outcome, then one JSON object last; exit status 0 (the finding is
the output, not the status).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from adapters.vllm import ADAPTER  # noqa: E402 - after the path set-up above
from adapters.vllm.repro_lookahead_livelock import parts as reference_parts  # noqa: E402
from reference.adapter import ADAPTER as REFERENCE  # noqa: E402
from spec.adapter import EngineParts  # noqa: E402
from spec.components import ResettableEngine  # noqa: E402
from spec.errors import MissingEmbeddingError  # noqa: E402
from spec.types import (  # noqa: E402
    EngineConfig,
    EngineRequest,
    MultiModalItem,
    PlaceholderRange,
)

STEPS = 8


def parts() -> EngineParts:
    """The reference's parts (the toy encoder), with vLLM's runner as the worker store."""
    assert ADAPTER.worker_store is not None
    return dataclasses.replace(reference_parts(), worker_store=ADAPTER.worker_store)


def main() -> None:
    assert ADAPTER.engine_loop is not None
    config = EngineConfig(token_budget=8, encoder_compute_budget=4, encoder_cache_size=4,
                          num_kv_blocks=8, block_size=2, enable_prefix_caching=True)
    engine = ADAPTER.engine_loop(config, parts())
    assert isinstance(engine, ResettableEngine)
    a = b"A" * 16
    image = (MultiModalItem(REFERENCE.hasher().hash_item(a), PlaceholderRange(0, 3)),)  # type: ignore[misc]
    log: list[str] = []
    engine.add_request(EngineRequest("r1", (0, 0, 0, 5, 6), image, (a,), 1))
    while "r1" in engine.snapshot().requests:
        engine.step()
    log.append("r1 finished (its blocks stay in the prefix cache)")
    engine.reset_encoder_cache()
    engine.add_request(EngineRequest("r2", (0, 0, 0, 5, 6, 7), image, (a,), 2))
    chunk = engine.step().chunks[0]
    log.append(f"r2 computes [{chunk.num_computed_tokens}, "
               f"{chunk.num_computed_tokens + chunk.num_new_tokens}) (prefix hit past A)")
    engine.preempt("r2")
    log.append(f"r2 preempted; reset_prefix_cache() -> {engine.reset_prefix_cache()}")
    error = ""
    for _ in range(STEPS):
        if "r2" not in engine.snapshot().requests:
            log.append("r2 finished")
            break
        try:
            out = engine.step()
        except MissingEmbeddingError as e:
            error = str(e)
            log.append(f"step raised: {error}")
            break
        log.append("; ".join(
            f"{c.request_id} computes [{c.num_computed_tokens}, "
            f"{c.num_computed_tokens + c.num_new_tokens}) encoding {list(c.encoder_inputs)}"
            for c in out.chunks
        ) or "nothing scheduled")
    for line in log:
        print(line)
    print(json.dumps({"encoder_cache_miss": bool(error), "error": error}))


if __name__ == "__main__":
    main()

"""Finding V21 through vLLM's own scheduling hook (docs/findings.md): with an EAGLE
drafter (shift 1), the look-ahead's truncation cuts a chunk to 0 tokens one position
before an image, and cuts it to 0 again at every later step: the request never finishes.

    MMSPEC_VLLM_SRC=.vllm-cache/vllm-0.33.0 PYTHONPATH=. .venv-vllm/bin/python \\
        adapters/vllm/repro_lookahead_livelock.py

The engine loop is the vLLM adapter's (the release's own ``Scheduler``, with the EAGLE
stand-in config of ``EngineConfig.num_speculative_tokens = 1``: vLLM calls its hook
with ``shift_computed_tokens = 1``, the model-runner stand-in verifies and proposes
drafts). Two prompts:

- ``rollback``: chunked multimodal input disabled, a token budget equal to the image's
  length (SYS-9 admits it: the image fits one step); one text token, then image A of 2
  tokens; token budget 2. The chunk
  ``[0, 2)`` would end inside A, so it is rolled back to ``max(0, 1 − 0 − 1) = 0``
  tokens — and the next step proposes the same chunk. (Both releases.)
- ``doorstep``: text, then image A of 1 token that the encoder budget cannot take while
  the request holds its first image B; 0.22.1's doorstep ``offset − (computed + 1)``
  is 0 one position before A, and B is only released when the chunk passes B's end.

Prints, per scenario, the tokens each step computed (at most 12 steps), then one JSON
object last; exit status 0 (the finding is the output, not the status).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from adapters.vllm import ADAPTER  # noqa: E402 - after the path set-up above
from reference.adapter import ADAPTER as REFERENCE  # noqa: E402
from spec.adapter import EngineParts  # noqa: E402
from spec.types import (  # noqa: E402
    EngineConfig,
    EngineRequest,
    MultiModalItem,
    PlaceholderRange,
)

STEPS = 12


def parts() -> EngineParts:
    """What vLLM's engine loop takes from outside: the encoder and the worker store
    (the model-runner stand-in's); the rest is unused by it."""
    assert REFERENCE.scheduling_hook is not None and REFERENCE.encoder_cache_manager is not None
    assert REFERENCE.hasher is not None and REFERENCE.encoder is not None
    assert REFERENCE.block_hasher is not None and REFERENCE.worker_store is not None
    return EngineParts(
        hasher=REFERENCE.hasher,
        encoder=REFERENCE.encoder,
        encoder_cache_manager=REFERENCE.encoder_cache_manager,
        scheduling_hook=REFERENCE.scheduling_hook,
        block_hasher=REFERENCE.block_hasher,
        worker_store=REFERENCE.worker_store,
    )


def run(config: EngineConfig, request: EngineRequest) -> list[int]:
    assert ADAPTER.engine_loop is not None
    engine = ADAPTER.engine_loop(config, parts())
    engine.add_request(request)
    computed: list[int] = []
    for _ in range(STEPS):
        if request.request_id not in engine.snapshot().requests:
            break
        out = engine.step()
        computed.append(sum(c.num_new_tokens for c in out.chunks))
    return computed


def main() -> None:
    hasher = REFERENCE.hasher()  # type: ignore[misc]
    a, b = b"A" * 16, b"B" * 16
    rollback = run(
        EngineConfig(token_budget=2, encoder_compute_budget=2, encoder_cache_size=2,
                     num_kv_blocks=8, block_size=1, disable_chunked_mm_input=True,
                     num_speculative_tokens=1),
        EngineRequest("r1", (1, 9, 9), (MultiModalItem(hasher.hash_item(a),
                                                        PlaceholderRange(1, 2)),), (a,), 1),
    )
    doorstep = run(
        EngineConfig(token_budget=3, encoder_compute_budget=2, encoder_cache_size=2,
                     num_kv_blocks=8, block_size=1, num_speculative_tokens=1),
        EngineRequest(
            "r1", (9, 9, 9),
            (MultiModalItem(hasher.hash_item(b), PlaceholderRange(0, 2)),
             MultiModalItem(hasher.hash_item(a), PlaceholderRange(2, 1))),
            (b, a), 1,
        ),
    )
    for name, steps in (("rollback", rollback), ("doorstep", doorstep)):
        print(f"{name}: tokens per step {steps}")
    print(json.dumps({"rollback": rollback, "doorstep": doorstep}))


if __name__ == "__main__":
    main()

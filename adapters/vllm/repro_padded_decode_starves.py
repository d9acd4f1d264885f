"""Finding V23 through vLLM's own ``Scheduler`` (docs/findings.md): with an EAGLE drafter
of ``k`` tokens and a token budget below ``1 + k``, 0.33.0's waiting loop pads a request
that needs one token (a full prefix hit: a repeated prompt, or a resumed request) to
``1 + k`` placeholder drafts, finds the padded chunk larger than the budget, and
``break``s ("Prefer to not schedule than schedule un-padded"): the request is never
scheduled, and neither is any request queued behind it.

    MMSPEC_VLLM_SRC=.vllm-cache/vllm-0.33.0 PYTHONPATH=. .venv-vllm/bin/python \\
        adapters/vllm/repro_padded_decode_starves.py

The engine loop is the vLLM adapter's (vLLM's ``Scheduler.schedule`` and
``update_from_output``, the model-runner stand-in, ``update_draft_token_ids``), with the
EAGLE stand-in config of ``k = 1`` and ``max_num_scheduled_tokens = 1`` (vLLM's start-up
checks ``max_num_batched_tokens > num_lookahead_tokens``, which holds: the adapter sets
it to 16). Text only: ``r1`` = ``[5, 6, 7]`` runs and finishes, which leaves its blocks
in the prefix cache; ``r2`` = the same prompt arrives, its prefix hit covers 2 of its 3
tokens, and it needs one. 0.22.1 has no padding: ``r2`` runs in the next step.

Prints the tokens each step computed (at most 8 steps after ``r2`` arrives), then one
JSON object last; exit status 0 (the finding is the output, not the status).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from adapters.vllm import ADAPTER  # noqa: E402 - after the path set-up above
from adapters.vllm.repro_lookahead_livelock import parts  # noqa: E402
from spec.types import EngineConfig, EngineRequest  # noqa: E402

STEPS = 8


def main() -> None:
    assert ADAPTER.engine_loop is not None
    config = EngineConfig(token_budget=1, num_kv_blocks=8, block_size=1,
                          enable_prefix_caching=True, num_speculative_tokens=1)
    engine = ADAPTER.engine_loop(config, parts())
    engine.add_request(EngineRequest("r1", (5, 6, 7), (), (), 1))
    while "r1" in engine.snapshot().requests:
        engine.step()
    engine.add_request(EngineRequest("r2", (5, 6, 7), (), (), 1))
    computed: list[int] = []
    for _ in range(STEPS):
        if "r2" not in engine.snapshot().requests:
            break
        computed.append(sum(c.num_new_tokens for c in engine.step().chunks))
    finished = "r2" not in engine.snapshot().requests
    print(f"r2 (full prefix hit, needs 1 token): tokens per step {computed}; "
          f"{'finished' if finished else 'never scheduled'}")
    print(json.dumps({"tokens_per_step": computed, "finished": finished}))


if __name__ == "__main__":
    main()

"""Finding V24 through vLLM's own ``AsyncScheduler`` (docs/findings.md): with async
scheduling and an EAGLE drafter, a request is preempted from outside while a decode
frame with drafts is in flight (a client's
``reset_prefix_cache(reset_running_requests=True)``, which the engine core runs between
two steps) and resumes in the next schedule. 0.22.1 sets ``async_tokens_to_discard =
num_output_placeholders`` — ``1 + k`` for one frame with ``k`` drafts — but discards one
frame per update: after the stale frame it discards the resumed request's first sample
too, which the runner keeps and computes from, so the scheduler goes on scheduling
positions past the tokens it knows; the stale frame's rejected drafts also roll back the
resumed request's ``num_computed_tokens`` (the machine's counterexample). 0.33.0 drains
the stale frame by its scheduled tokens and discards it whole (``drop_stale_output``):
nothing is lost.

    MMSPEC_VLLM_SRC=.vllm-cache/vllm-0.22.1 PYTHONPATH=. .venv-vllm/bin/python \\
        adapters/vllm/repro_stale_spec_frame.py

The engine loop is the vLLM adapter's (vLLM's ``AsyncScheduler`` with the EAGLE stand-in
config of ``k = 1``, the model-runner stand-in, a queue of two batches as
``EngineCore.step_with_batch_queue``); ``preempt`` does for one request what
``reset_prefix_cache(reset_running_requests=True)`` does for every running one. Text
only: ``r1`` = ``[5, 6, 7, 8]``, 4 tokens to generate; after its prefill executes, its
first decode (one token and one draft) is in flight; ``r1`` is preempted then.

Prints each step's executed chunk and ``r1``'s generated tokens, then one JSON object
last; exit status 0 (the finding is the output, not the status).
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
    config = EngineConfig(token_budget=8, num_kv_blocks=16, block_size=1,
                          num_speculative_tokens=1, async_scheduling=True)
    engine = ADAPTER.engine_loop(config, parts())
    engine.add_request(EngineRequest("r1", (5, 6, 7, 8), (), (), 4))
    engine.step()  # schedules the prefill
    engine.step()  # executes it; the first decode, with one draft, is in flight
    engine.preempt("r1")
    tokens: list[int] = []
    for step in range(STEPS):
        out = engine.step()
        snap = engine.snapshot().requests.get("r1")
        chunks = [(c.num_computed_tokens, c.num_new_tokens, c.num_draft_tokens)
                  for c in out.chunks]
        if snap is None:
            print(f"step {step + 3}: executed {chunks}; r1 finished")
            break
        tokens.append(len(snap.output_token_ids))
        print(f"step {step + 3}: executed {chunks} (start, tokens, drafts); r1 has "
              f"{tokens[-1]} generated, {snap.num_computed_tokens} computed")
    # step 3 executes the stale frame (dropped), step 4 the resumed chunk, which ends at
    # P + g and samples: r1 must have 2 generated tokens after it
    dropped = len(tokens) > 1 and tokens[1] < 2
    print(f"the resumed request's first sample was {'dropped' if dropped else 'kept'}")
    print(json.dumps({"resumed_sample_dropped": dropped, "generated_after_each_step": tokens}))

if __name__ == "__main__":
    main()

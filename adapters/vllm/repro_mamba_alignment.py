"""Findings V28, V29 and V30 through vLLM's own ``Scheduler`` serving a hybrid model
(docs/findings.md): a KV cache config with a ``MambaSpec`` group in ``"align"`` mode, so
that ``Scheduler._mamba_block_aligned_split`` shapes every prefill chunk.

    MMSPEC_VLLM_SRC=.vllm-cache/vllm-0.22.1 PYTHONPATH=. .venv-vllm/bin/python \\
        adapters/vllm/repro_mamba_alignment.py

The engine loop is the vLLM adapter's (vLLM's ``Scheduler`` built for model runner V1,
vLLM's runner methods behind the worker store, the reference's toy encoder). Four
scenarios, each a fresh engine, each run for at most :data:`STEPS` steps:

- ``doorstep`` (V28, vllm-project/vllm#40707): blocks of 4, an encoder cache that holds
  one image; image A at [1, 9) and B at [10, 16). The chunk reaching B stops at its
  doorstep, 10, inside the block [8, 12), while the request still holds A.
- ``small_budget`` (V28): a token budget of 1 with blocks of 2, a text-only prompt.
- ``whole_image`` (V28 on 0.22.1, V30 on 0.33.0): chunked multimodal input disabled,
  blocks of 2, a budget of 3, image A at [0, 3) followed by one text token.
- ``repeat`` (V29): blocks of 2, the prompt [0, 0, 0, 0] twice; the second request's
  prefix hit is where its first chunk starts.

Prints each step, then one JSON object last (per scenario: ``finished``, the chunks and
what they show); exit status 0 (the findings are the output, not the status).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from adapters.vllm import ADAPTER  # noqa: E402 - after the path set-up above
from adapters.vllm.repro_stripped_resume import parts  # noqa: E402
from reference.adapter import ADAPTER as REFERENCE  # noqa: E402
from spec.types import (  # noqa: E402
    EngineConfig,
    EngineRequest,
    MultiModalItem,
    PlaceholderRange,
)

STEPS = 12


def image(label: bytes, offset: int, length: int) -> tuple[MultiModalItem, bytes]:
    data = label * 16
    assert REFERENCE.hasher is not None
    item = MultiModalItem(REFERENCE.hasher().hash_item(data), PlaceholderRange(offset, length))
    return item, data


def run(name: str, config: EngineConfig, requests: list[EngineRequest]) -> dict[str, Any]:
    """Add the requests one after another (each runs alone until it finishes or
    :data:`STEPS` steps pass) and record every chunk."""
    assert ADAPTER.engine_loop is not None
    engine = ADAPTER.engine_loop(config, parts())
    chunks: list[tuple[str, int, int]] = []
    finished: list[str] = []
    for request in requests:
        engine.add_request(request)
        for _ in range(STEPS):
            out = engine.step()
            for chunk in out.chunks:
                chunks.append((chunk.request_id, chunk.num_computed_tokens, chunk.num_new_tokens))
                print(f"{name}: {chunk.request_id} computes [{chunk.num_computed_tokens}, "
                      f"{chunk.num_computed_tokens + chunk.num_new_tokens})")
            if not out.chunks:
                print(f"{name}: nothing scheduled")
            finished += list(out.finished)
            if request.request_id in out.finished:
                break
    return {"finished": finished, "chunks": chunks}


def main() -> None:
    hybrid = {"mamba_block_aligned": True, "enable_prefix_caching": True}
    (a, a_data), (b, b_data) = image(b"A", 1, 8), image(b"B", 10, 6)
    doorstep = run(
        "doorstep",
        EngineConfig(token_budget=8, encoder_compute_budget=8, encoder_cache_size=8,
                     num_kv_blocks=16, block_size=4, **hybrid),
        [EngineRequest("r1", (0,) * 18, (a, b), (a_data, b_data), 1)],
    )
    small = run(
        "small_budget",
        EngineConfig(token_budget=1, num_kv_blocks=16, block_size=2, **hybrid),
        [EngineRequest("r1", (0, 0, 0), (), (), 1)],
    )
    (whole_a, whole_data) = image(b"A", 0, 3)
    whole = run(
        "whole_image",
        EngineConfig(token_budget=3, encoder_compute_budget=3, encoder_cache_size=4,
                     num_kv_blocks=16, block_size=2, disable_chunked_mm_input=True, **hybrid),
        [EngineRequest("r1", (0, 0, 0, 7), (whole_a,), (whole_data,), 1)],
    )
    repeat = run(
        "repeat",
        EngineConfig(token_budget=4, num_kv_blocks=16, block_size=2, **hybrid),
        [EngineRequest(rid, (0, 0, 0, 0), (), (), 1) for rid in ("r1", "r2")],
    )
    repeat["prefix_hit"] = next(start for rid, start, _ in repeat["chunks"] if rid == "r2")
    # a chunk starting at A's offset and ending inside A, which the flag forbids
    whole["splits_the_image"] = any(start == 0 and new < 3 for _, start, new in whole["chunks"])
    print(json.dumps({"doorstep": doorstep, "small_budget": small, "whole_image": whole,
                      "repeat": repeat}))


if __name__ == "__main__":
    main()

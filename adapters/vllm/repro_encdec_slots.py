"""Finding V20 through vLLM's own scheduler code (docs/findings.md): the encoder-decoder
cache's free slots grow with every decode step, and what still bounds the encoder work.

    MMSPEC_VLLM_SRC=.vllm-cache/vllm-0.33.0 PYTHONPATH=. .venv-vllm/bin/python \\
        adapters/vllm/repro_encdec_slots.py

A Whisper-like request (one encoder input of ``E`` embeddings at offset 0) goes through
the calls ``Scheduler`` makes for an encoder-decoder model, each one vLLM's own method on
a ``Scheduler`` shell carrying exactly the attributes it reads (as the scheduling hook's
adapter builds it) with ``is_encoder_decoder = True``: ``_try_schedule_encoder_inputs``
and ``EncoderDecoderCacheManager.allocate`` at its first step, ``_free_encoder_inputs``
after each step (``update_from_output`` calls it for every scheduled request), and
``free`` when it finishes. It prints ``num_free_slots`` after each call, then schedules
three waiting requests in one step with the inflated slots and the step's compute budget
(``max_num_encoder_input_tokens``, equal to the cache size in 0.22.1 and 0.33.0): what
the compute budget admits is all that is admitted.

Prints one JSON object last (the test reads it); exit status 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from adapters.vllm import CODE  # noqa: E402 - after the path set-up above
from adapters.vllm.requests_bridge import vllm_request  # noqa: E402
from adapters.vllm.versions import attributes_read  # noqa: E402
from spec.types import MultiModalItem, PlaceholderRange  # noqa: E402

EMBEDS = 4
CACHE_SIZE = 8
DECODE_STEPS = 5


def scheduler_shell(manager: Any) -> Any:
    """``Scheduler.__new__(Scheduler)`` with what ``_free_encoder_inputs`` and
    ``_try_schedule_encoder_inputs`` read, for an encoder-decoder model."""
    scheduler = CODE.module("scheduler").Scheduler
    shell = scheduler.__new__(scheduler)
    values = {
        "encoder_cache_manager": manager,
        "is_encoder_decoder": True,
        "ec_connector": None,
        "scheduler_config": SimpleNamespace(disable_chunked_mm_input=True),
        "encoder_cache_mismatch_reqs": set(),
    }
    needed = attributes_read(scheduler, "_free_encoder_inputs") | attributes_read(
        scheduler, "_try_schedule_encoder_inputs"
    )
    missing = sorted(needed - set(values))
    if missing:
        raise SystemExit(f"the Scheduler shell lacks {missing}: update this script")
    for name in needed:
        setattr(shell, name, values[name])
    return shell


def audio_request(request_id: str) -> Any:
    """One encoder input at offset 0 (encoder-decoder inputs sit at the start)."""
    item = MultiModalItem(f"audio-{request_id}", PlaceholderRange(0, EMBEDS))
    return vllm_request(CODE, request_id, [0] * (EMBEDS + 2), [item])


def schedule_first_step(shell: Any, request: Any, budget: int) -> list[int]:
    """What ``Scheduler.schedule`` does for a waiting request: the hook, then
    ``_allocate_encoder_inputs``' allocate for each input it scheduled."""
    result = shell._try_schedule_encoder_inputs(request, 0, request.num_tokens, budget)
    to_schedule, new_tokens = list(result[0]), result[1]
    if new_tokens > 0:
        for input_id in to_schedule:
            shell.encoder_cache_manager.allocate(request, input_id)
        request.num_computed_tokens += new_tokens
    return to_schedule if new_tokens > 0 else []


def main() -> int:
    manager = CODE.module("encoder_cache_manager").EncoderDecoderCacheManager(CACHE_SIZE)
    shell = scheduler_shell(manager)
    trace: list[tuple[str, int]] = [("start", manager.num_free_slots)]
    whisper = audio_request("r1")
    schedule_first_step(shell, whisper, CACHE_SIZE)
    trace.append(("step 1: r1's audio allocated", manager.num_free_slots))
    for step in range(1, DECODE_STEPS + 1):
        shell._free_encoder_inputs(whisper)  # update_from_output, after each step
        trace.append((f"update_from_output of step {step}", manager.num_free_slots))
    manager.free(whisper)  # _free_request, when r1 finishes
    trace.append(("r1 finishes: free(r1)", manager.num_free_slots))
    for what, free in trace:
        print(f"{what}: num_free_slots = {free} (cache_size {CACHE_SIZE})")

    # One step with the inflated slots: three waiting requests, the step's compute budget.
    budget, admitted = CACHE_SIZE, []
    for request_id in ("r2", "r3", "r4"):
        request = audio_request(request_id)
        scheduled = schedule_first_step(shell, request, budget)
        budget -= EMBEDS * len(scheduled)
        if scheduled:
            admitted.append(request_id)
    print(f"next step, compute budget {CACHE_SIZE}: admitted {admitted}, "
          f"{EMBEDS * len(admitted)} embeddings allocated")
    print(json.dumps({
        "cache_size": CACHE_SIZE,
        "free_slots": [free for _, free in trace],
        "admitted": admitted,
        "embeds_allocated_next_step": EMBEDS * len(admitted),
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What vLLM checks before a request reaches its ``Scheduler``, standing in for the
engine's input processing and start-up checks (SYS-9).

vLLM's input processor rejects malformed prompts and its processors never produce an
item larger than the budgets ``compute_mm_encoder_budget`` sized from them; start-up
refuses a ``max_model_len`` the KV cache cannot hold. The machine hands the engine
requests directly, so those checks are made here, in the spec's terms; nothing here
runs inside ``schedule()`` or ``update_from_output()``.
"""

from __future__ import annotations

# The request and configuration checks are the reference engine's own: one definition
# of what SYS-9 calls malformed (re-exported for adapters/vllm/engine.py).
from reference.engine import check_config, validate_request
from spec.types import HYBRID_STATE_BLOCKS, EngineConfig, EngineRequest

__all__ = ["admission_problem", "check_config", "validate_request"]


def admission_problem(config: EngineConfig, request: EngineRequest) -> str | None:
    """Why ``request`` could never run under ``config`` (``None``: it can)."""
    rid = request.request_id
    for index, item in enumerate(request.items):
        n = item.num_embeds
        if n > config.encoder_compute_budget or n > config.encoder_cache_size:
            return (
                f"request {rid} item {index} needs {n} embeddings; the encoder budget is "
                f"{config.encoder_compute_budget}, the cache {config.encoder_cache_size}"
            )
        if config.disable_chunked_mm_input and item.mm_position.length > config.token_budget:
            return (
                f"request {rid} item {index} spans {item.mm_position.length} tokens, more "
                f"than the token budget {config.token_budget} with chunked mm input disabled"
            )
    # the drafter's look-ahead slots too (allocate_slots(num_lookahead_tokens=k))
    positions = len(request.token_ids) + request.max_new_tokens - 1 + config.num_speculative_tokens
    blocks = -(-positions // config.block_size)
    # a hybrid model's states come from the same pool (the MambaManager's blocks)
    blocks += HYBRID_STATE_BLOCKS if config.mamba_block_aligned else 0
    if blocks > config.num_kv_blocks:
        return (
            f"request {rid} needs {blocks} KV blocks for {positions} positions; the KV cache "
            f"has {config.num_kv_blocks}"
        )
    return None

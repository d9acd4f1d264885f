"""What vLLM checks before a request reaches its ``Scheduler``, standing in for the
engine's input processing and start-up checks (SYS-9).

vLLM's input processor rejects malformed prompts and its processors never produce an
item larger than the budgets ``compute_mm_encoder_budget`` sized from them; start-up
refuses a ``max_model_len`` the KV cache cannot hold. The machine hands the engine
requests directly, so those checks are made here, in the spec's terms; nothing here
runs inside ``schedule()`` or ``update_from_output()``.
"""

from __future__ import annotations

from collections.abc import Container

from spec.errors import InvalidInputError
from spec.types import EngineConfig, EngineRequest, MultiModalItem

_MINIMUMS = {
    "token_budget": 1,
    "encoder_compute_budget": 0,
    "encoder_cache_size": 0,
    "num_kv_blocks": 1,
    "block_size": 1,
    "hidden_size": 1,
}


def check_config(config: EngineConfig) -> None:
    """``InvalidInputError`` for a config below its limits, or not ints (SYS-9)."""
    if not isinstance(config, EngineConfig):
        raise InvalidInputError(f"config must be an EngineConfig, got {type(config).__name__}")
    for name, minimum in _MINIMUMS.items():
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InvalidInputError(
                f"EngineConfig.{name} must be an int >= {minimum}, got {value!r}"
            )


def validate_request(request: EngineRequest, unfinished: Container[str]) -> None:
    """``InvalidInputError`` for a malformed request or an id already in the engine."""
    if not isinstance(request, EngineRequest):
        raise InvalidInputError(f"expected an EngineRequest, got {type(request).__name__}")
    request.view()  # validates the id, and that the items are sorted and disjoint
    rid = request.request_id
    if rid in unfinished:
        raise InvalidInputError(f"request {rid!r} is already in the engine")
    if not request.token_ids:
        raise InvalidInputError(f"request {rid}: empty prompt")
    for token in request.token_ids:
        if isinstance(token, bool) or not isinstance(token, int) or token < 0:
            raise InvalidInputError(f"request {rid}: bad token {token!r}")
    if len(request.data) != len(request.items):
        raise InvalidInputError(
            f"request {rid}: {len(request.items)} items but {len(request.data)} images"
        )
    for item in request.items:
        if not isinstance(item, MultiModalItem):
            raise InvalidInputError(f"request {rid}: items must be MultiModalItems")
        if item.mm_position.end > len(request.token_ids):
            raise InvalidInputError(
                f"request {rid}: item {item.mm_hash} ends past the prompt"
            )
    max_new = request.max_new_tokens
    if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 1:
        raise InvalidInputError(f"request {rid}: max_new_tokens must be >= 1")


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
    positions = len(request.token_ids) + request.max_new_tokens - 1
    blocks = -(-positions // config.block_size)
    if blocks > config.num_kv_blocks:
        return (
            f"request {rid} needs {blocks} KV blocks for {positions} positions; the KV cache "
            f"has {config.num_kv_blocks}"
        )
    return None

"""SYS-16's checks: a hybrid model's recurrent state is cached only at block boundaries.

A Mamba-style layer's state exists for the last position computed; with
``EngineConfig.mamba_block_aligned`` it is cached per KV block, written when a chunk
ends on the block's boundary. Each function checks one part of the clause on one
chunk, from the request's facts and the chunk alone (the model does not know the
engine's schedule, only what every correct schedule of a hybrid model owes):
:func:`sys16_ends_on_a_boundary`,
:func:`sys16_stops_at_the_last_hit_boundary` and :func:`sys16_hit_on_a_cached_state`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from properties.framework import check
from properties.models.engine import RequestFacts
from spec.components import KVSource
from spec.types import EngineConfig

#: the contents of a request's first ``h`` positions (SYS-6's sources): a state cached
#: after them serves exactly the requests whose first ``h`` positions are the same
StateKey = tuple[KVSource, ...]


def prefill_end(facts: RequestFacts, outputs: int) -> int:
    """``max(P, P + g − 1)``: where a request's prefill (or a resumed request's replay of
    its generated tokens) ends; chunks starting there are decodes."""
    return max(facts.num_prompt_tokens, facts.num_tokens(outputs) - 1)


def state_key(facts: RequestFacts, end: int, output_token_ids: Sequence[int]) -> StateKey:
    """What the state after the request's first ``end`` positions was computed from."""
    return tuple(facts.source_at(p, output_token_ids) for p in range(end))


def whole_item_across(
    config: EngineConfig, facts: RequestFacts, start: int, end: int, boundary: int
) -> bool:
    """Whether the chunk ``[start, end)`` ends at the end of an item it computes whole
    across ``boundary`` (chunked multimodal input disabled: the item cannot be split)."""
    if not config.disable_chunked_mm_input:
        return False
    return any(
        start <= item.mm_position.offset < boundary < item.mm_position.end == end
        for item in facts.request.items
    )


def sys16_ends_on_a_boundary(
    step: int, config: EngineConfig, facts: RequestFacts, outputs: int, start: int, new: int
) -> None:
    """A prefill chunk that ends before the prefill does ends on a block boundary, at an
    item's offset (the hook stopped it at the item's doorstep, SCH-5), at the end of an
    item it computes whole with chunked multimodal input disabled, or, with a token
    budget smaller than a block, anywhere."""
    end, block = start + new, config.block_size
    if end >= prefill_end(facts, outputs) or end % block == 0:
        return
    if config.token_budget < block:
        return
    offsets = {item.mm_position.offset for item in facts.request.items}
    check(
        end in offsets or whole_item_across(config, facts, start, end, end // block * block),
        "SYS-16",
        f"step {step}: {facts.request_id} computes [{start}, {end}), a prefill chunk "
        f"ending inside a block, at no image's offset: the token budget's cut should "
        f"end on a {block}-token boundary (the state is cached only there)",
    )


def sys16_stops_at_the_last_hit_boundary(
    step: int, config: EngineConfig, facts: RequestFacts, outputs: int, start: int, new: int
) -> None:
    """A chunk starting below ``⌊(P + g − 1)/bs⌋·bs`` — the longest prefix hit a request
    with the same tokens can take — ends at or before it, so that state is cached (but
    for an item computed whole across it, chunked multimodal input disabled)."""
    block = config.block_size
    last = (facts.num_tokens(outputs) - 1) // block * block
    end = start + new
    check(
        not start < last < end or whole_item_across(config, facts, start, end, last),
        "SYS-16",
        f"step {step}: {facts.request_id} computes [{start}, {start + new}) across "
        f"position {last}, the last block boundary a prefix hit of its "
        f"{facts.num_tokens(outputs)} tokens can use: the state there is never cached",
    )


def sys16_hit_on_a_cached_state(
    step: int, request_id: str, start: int, key: StateKey, cached: Collection[StateKey]
) -> None:
    """A request's first chunk after admission or preemption starts at a prefix hit
    ``h > 0`` only where a chunk over the same first ``h`` positions ended: the one place
    a state after them was written."""
    check(
        start == 0 or key in cached,
        "SYS-16",
        f"step {step}: {request_id} starts at a prefix hit of {start} positions, but no "
        f"chunk over the same {start} positions ended there: the hybrid model's state "
        f"after them was never written (the request resumes from another state)",
    )

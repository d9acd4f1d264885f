"""The transitions ``EngineMachine`` records (SPEC.md "## Transitions"): which of the
rare situations that judge the SYS clauses a step's chunks reached. Each function
returns the names reached, in order, once per occurrence; the machine counts them.
"""

from __future__ import annotations

from collections.abc import Sequence

from properties.models.engine import (
    EngineModel,
    RequestFacts,
    RequestProgress,
    ceil_div,
    window_rows,
)
from spec.components import EngineSnapshot, StepOutput
from spec.types import EngineConfig


def chunk_transitions(
    facts: RequestFacts,
    progress: RequestProgress,
    start: int,
    new: int,
    budget_left: int,
    encoded: set[str],
) -> list[str]:
    """``prefix_hit_inside_image``, ``mid_placeholder_from_cache``,
    ``encode_partly_consumed`` and ``doorstep_truncation`` for one chunk
    ``[start, start + new)`` (``progress``: the request's before the chunk;
    ``budget_left``: the step's token budget before it; ``encoded``: the step's
    encodes)."""
    reached: list[str] = []
    end = start + new
    prompt = facts.num_prompt_tokens
    if not progress.running and start > 0:
        if facts.item_strictly_containing(start) is not None:
            reached.append("prefix_hit_inside_image")
    for item in facts.request.items:
        position = item.mm_position
        first_row, end_row = window_rows(position, start, end)
        inside = position.offset < start < position.end
        if inside and end_row > first_row and item.mm_hash not in encoded:
            reached.append("mid_placeholder_from_cache")
        covers_whole = start <= position.offset and end >= position.end
        overlaps = position.offset < end and position.end > start
        if overlaps and not covers_whole and item.mm_hash in encoded:
            reached.append("encode_partly_consumed")
        if (
            end == position.offset
            and end < prompt
            and new < min(prompt - start, budget_left)
        ):
            reached.append("doorstep_truncation")
    return reached


def stall_transitions(
    config: EngineConfig,
    model: EngineModel,
    live_before: Sequence[str],
    scheduled_ids: Sequence[str],
    out: StepOutput,
    after: EngineSnapshot,
) -> list[str]:
    """``zero_budget_stall``: in a step that left token budget unused and preempted
    nobody, a request with prefill left got no tokens although KV space could not
    have stopped it (the free blocks, even before the finished requests released
    theirs, covered every unscheduled waiting prompt): its next image got no
    encoder budget or cache space. Once per such request."""
    block = config.block_size
    released = sum(ceil_div(model.facts[r].kv_positions(), block) for r in out.finished)
    free_low = config.num_kv_blocks - after.num_kv_blocks_in_use - released
    stalled = [
        r
        for r in live_before
        if r not in scheduled_ids
        and model.is_live(r)
        and not model.progress[r].prefill_done
    ]
    kv_room = all(
        free_low
        >= ceil_div(
            model.facts[r].num_tokens(model.progress[r].outputs) + model.facts[r].lookahead,
            block,
        )
        for r in stalled
        if not model.progress[r].running
    )
    return [
        "zero_budget_stall"
        for request_id in stalled
        if model.progress[request_id].running or kv_room
    ]


def in_flight_transitions(
    model: EngineModel, out: StepOutput, after: EngineSnapshot
) -> list[str]:
    """``release_while_in_flight`` (async scheduling): after the call, a chunk left in
    flight reads rows of an item its request no longer references (released at the
    executed frontier's update: the next call must still serve it)."""
    reached: list[str] = []
    for chunk in out.in_flight:
        facts = model.facts.get(chunk.request_id)
        if facts is None:
            continue
        start, end = chunk.num_computed_tokens, chunk.num_computed_tokens + chunk.num_new_tokens
        for index, _rows in facts.gathers_in(start, end):
            mm_hash = facts.request.items[index].mm_hash
            if chunk.request_id not in after.encoder_cache_refs.get(mm_hash, frozenset()):
                reached.append("release_while_in_flight")
    return reached

"""Chunks for a hybrid model whose recurrent state is cached per block (SYS-16).

A Mamba-style layer keeps one state per request, the state after the last position
computed. In vLLM's "align" cache mode (``mamba_cache_mode``) it is cached per KV
block: the state after a block's last position, written only when a chunk ends on the
block's boundary (``vllm/v1/worker/mamba_utils.py``). So the scheduler shapes prefill chunks
(``Scheduler._mamba_block_aligned_split``, v0.33.0's order: on the chunk the token
budget allows, before the encoder-scheduling hook cuts it at an item):

- a chunk the token budget ends inside a block is cut back to the block's start, unless
  that leaves nothing and a whole block fits in a step's budget (then the request waits
  for a step with room; with ``token_budget < block_size`` it computes the part);
- a chunk starting below the last boundary a prefix hit of the same tokens can use,
  ``⌊(P + g − 1)/bs⌋·bs`` (a hit leaves at least one position to compute), stops there,
  so that state is cached;
- with chunked multimodal input disabled an item is computed whole, so where either
  cut would end the chunk inside an item it starts at or after, the chunk ends at the
  item's end if the budget reaches it, else at its offset (where vLLM would roll back to
  the offset and, with the chunk starting there, never progress).

Decode chunks (starting at or past ``max(P, P + g − 1)``) are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence


def aligned_chunk(
    start: int,
    proposed: int,
    num_prompt_tokens: int,
    num_tokens: int,
    block_size: int,
    token_budget: int,
    whole_items: Sequence[tuple[int, int]] = (),
) -> int:
    """The tokens of the chunk ``[start, start + proposed)`` a hybrid model computes;
    ``whole_items``: the ``(offset, end)`` of each item, when they must stay whole."""
    prefill_end = max(num_prompt_tokens, num_tokens - 1)
    if start >= prefill_end:
        return proposed
    end = start + proposed
    if end < prefill_end:
        floored = end // block_size * block_size
        if floored > start or block_size <= token_budget:
            end = floored
    return stopped(start, end, start + proposed, num_tokens, block_size, whole_items) - start


def stopped(
    start: int,
    end: int,
    budget_end: int,
    num_tokens: int,
    block_size: int,
    whole_items: Sequence[tuple[int, int]],
) -> int:
    """Where the chunk ``[start, end)`` ends after the stop at the last boundary a hit
    can use, with no item left split (an item's end within ``budget_end``, or its offset)."""
    last_hit_boundary = (num_tokens - 1) // block_size * block_size
    if start < last_hit_boundary < end:
        end = last_hit_boundary
    for offset, item_end in whole_items:
        if start <= offset < end < item_end:
            end = item_end if item_end <= budget_end else offset
    return max(end, start)

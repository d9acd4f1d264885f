"""The request-level facts the engine invariants need (SYS-1..10), written from SPEC.md.

The engine's *policy* (which request runs when, which entry is evicted) is not modelled:
many schedules are correct. What is modelled is what every correct schedule must agree
on, per request: its prompt, where its images are, the embedding rows each image must
produce (computed by a fresh encoder, independent of the engine's), what each KV position
must have been computed from, whether it can be admitted at all, and — followed from the
engine's step outputs — how far it has computed, which rows it has been served since it
(re)started, and how many tokens it has generated.

Preemption is vLLM's (``Scheduler._preempt_request``): the KV and the encoder references
go, ``num_computed_tokens`` returns to 0, the generated tokens stay. A resumed request
recomputes its prompt *and* its generated tokens (``num_tokens = P + g``), from a prefix
hit of at most ``num_tokens - 1`` positions, and the chunk that catches up with
``num_tokens`` samples token ``g + 1``: the generated count continues, it never restarts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spec.components import Encoder, KVSource
from spec.types import (
    HYBRID_STATE_BLOCKS,
    EngineConfig,
    EngineRequest,
    ImageInput,
    PlaceholderRange,
)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def window_rows(position: PlaceholderRange, start: int, end: int) -> tuple[int, int]:
    """Embedding rows ``[a, b)`` serving prompt positions ``[start, end)`` of the item
    at ``position`` (absolute positions; the window is clipped to the range). Counted
    here from the mask, not with ``get_embeds_indices_in_range``."""
    lo = max(start, position.offset) - position.offset
    hi = min(end, position.end) - position.offset
    if hi <= lo:
        return 0, 0
    mask = position.is_embed or (True,) * position.length
    return sum(mask[:lo]), sum(mask[:hi])


@dataclass(frozen=True)
class RequestFacts:
    """What never changes about one request: its prompt, its items and their rows."""

    request: EngineRequest
    #: the scenario's name of each item's image ("A", "B", ...), for narration
    labels: tuple[str, ...]
    #: per item, the ``(num_embeds, hidden)`` rows a correct encoder produces
    expected_rows: tuple[NDArray[Any], ...]
    #: the drafter's look-ahead KV slots (SYS-13; 0: no drafter)
    lookahead: int = 0

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.request.token_ids)

    def num_tokens(self, outputs: int) -> int:
        """``P + g``: the positions a request with ``outputs`` generated tokens computes
        before it samples the next (vLLM's ``Request.num_tokens``)."""
        return self.num_prompt_tokens + outputs

    def embed_positions(self, index: int) -> list[int]:
        """Absolute prompt positions of item ``index`` that take an embedding row."""
        position = self.request.items[index].mm_position
        mask = position.is_embed or (True,) * position.length
        return [position.offset + k for k, flag in enumerate(mask) if flag]

    def source_at(self, position: int, output_token_ids: Sequence[int]) -> KVSource:
        """What position ``position`` must be computed from (SYS-6)."""
        if position >= self.num_prompt_tokens:
            return ("token", output_token_ids[position - self.num_prompt_tokens])
        for item in self.request.items:
            placeholder = item.mm_position
            if placeholder.offset <= position < placeholder.end:
                mask = placeholder.is_embed or (True,) * placeholder.length
                relative = position - placeholder.offset
                if mask[relative]:
                    return ("embed", item.mm_hash, sum(mask[:relative]))
                break
        return ("token", self.request.token_ids[position])

    def gathers_in(self, start: int, end: int) -> list[tuple[int, NDArray[Any]]]:
        """For the window ``[start, end)``: ``(item index, expected rows)`` for every
        item whose positions in the window include an embedding position, in order."""
        result: list[tuple[int, NDArray[Any]]] = []
        for index, item in enumerate(self.request.items):
            first, last = window_rows(item.mm_position, start, end)
            if last > first:
                result.append((index, self.expected_rows[index][first:last]))
        return result

    def splice_rows(self, start: int) -> NDArray[Any]:
        """The unchunked splice's embedding rows for prompt positions ``[start, P)``,
        concatenated in position order (SYS-2)."""
        parts = [rows for _, rows in self.gathers_in(start, self.num_prompt_tokens)]
        if not parts:
            hidden = self.expected_rows[0].shape[1] if self.expected_rows else 0
            return np.zeros((0, hidden), dtype=np.float32)
        return np.concatenate(parts)

    def item_at(self, position: int) -> int | None:
        """The item whose range holds ``position`` (``offset <= position < end``)."""
        for index, item in enumerate(self.request.items):
            if item.mm_position.offset <= position < item.mm_position.end:
                return index
        return None

    def item_strictly_containing(self, position: int) -> int | None:
        """The item with ``offset < position < end``, if any."""
        for index, item in enumerate(self.request.items):
            if item.mm_position.offset < position < item.mm_position.end:
                return index
        return None

    def items_ending_after(self, position: int) -> int:
        return sum(1 for item in self.request.items if item.mm_position.end > position)

    def kv_positions(self) -> int:
        """KV positions the request needs: the prompt and every generated token but the
        last (which is never fed back), and a drafter's look-ahead slots."""
        return self.num_prompt_tokens + self.request.max_new_tokens - 1 + self.lookahead


@dataclass
class RequestProgress:
    """What the engine's outputs said about one request since it (re)started."""

    #: positions computed (0 while waiting)
    computed: int = 0
    #: scheduled at least once since admission or the last preemption
    running: bool = False
    #: ``num_computed_tokens`` of the first chunk since (re)start: the prefix hit
    start: int | None = None
    #: tokens generated since admission (a preemption keeps them)
    outputs: int = 0
    #: embedding rows gathered since (re)start, in order
    gathered: list[NDArray[Any]] = field(default_factory=list)
    #: items of which at least one row was gathered since (re)start
    touched: set[int] = field(default_factory=set)
    prefill_done: bool = False

    def reset(self) -> None:
        """A preemption: the KV of the prompt and of the generated tokens is recomputed
        from scratch (or from a prefix hit); the generated tokens themselves are kept."""
        self.computed = 0
        self.running = False
        self.start = None
        self.gathered = []
        self.touched = set()
        self.prefill_done = False


class EngineModel:
    """Facts and progress of every request the machine has given the engine."""

    def __init__(self, config: EngineConfig, encoder: Callable[[int], Encoder]) -> None:
        self.config = config
        self._encoder = encoder(config.hidden_size)
        self._rows_by_content: dict[tuple[str, int], NDArray[Any]] = {}
        self.num_embeds_by_hash: dict[str, int] = {}
        self.facts: dict[str, RequestFacts] = {}
        self.progress: dict[str, RequestProgress] = {}
        self.finished: set[str] = set()
        self.aborted: set[str] = set()

    # --- admission (SYS-9) ---------------------------------------------------------------

    def admission_problem(self, request: EngineRequest) -> str | None:
        """Why ``request`` can never run under this config, or None if it can."""
        config = self.config
        for index, item in enumerate(request.items):
            n = item.num_embeds
            if n > config.encoder_compute_budget:
                return f"item {index} needs {n} embeddings > encoder budget"
            if n > config.encoder_cache_size:
                return f"item {index} needs {n} embeddings > encoder cache"
            if config.disable_chunked_mm_input and item.mm_position.length > config.token_budget:
                return f"item {index} spans {item.mm_position.length} tokens > token budget"
        positions = len(request.token_ids) + request.max_new_tokens - 1
        positions += config.num_speculative_tokens  # the drafter's look-ahead slots
        states = HYBRID_STATE_BLOCKS if config.mamba_block_aligned else 0  # SYS-16
        if ceil_div(positions, config.block_size) + states > config.num_kv_blocks:
            return (
                f"{positions} KV positions and {states} state blocks > "
                f"{config.num_kv_blocks} blocks"
            )
        return None

    def expected_rows(self, data: ImageInput, mm_hash: str, num_embeds: int) -> NDArray[Any]:
        key = (mm_hash, num_embeds)
        if key not in self._rows_by_content:
            self._rows_by_content[key] = self._encoder.encode(data, num_embeds)
        return self._rows_by_content[key]

    def admit(self, request: EngineRequest, labels: Sequence[str]) -> RequestFacts:
        rows = tuple(
            self.expected_rows(data, item.mm_hash, item.num_embeds)
            for item, data in zip(request.items, request.data, strict=True)
        )
        for item in request.items:
            self.num_embeds_by_hash[item.mm_hash] = item.num_embeds
        facts = RequestFacts(request, tuple(labels), rows, self.config.num_speculative_tokens)
        self.facts[request.request_id] = facts
        self.progress[request.request_id] = RequestProgress()
        return facts

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def live(self) -> list[str]:
        return list(self.progress)

    def is_live(self, request_id: str) -> bool:
        return request_id in self.progress

    def finish(self, request_id: str) -> None:
        del self.progress[request_id]
        self.finished.add(request_id)

    def abort(self, request_id: str) -> None:
        del self.progress[request_id]
        self.aborted.add(request_id)

    def size_of(self, mm_hash: str) -> int:
        return self.num_embeds_by_hash[mm_hash]

    def held_embeds(self, refs: Mapping[str, object]) -> int:
        return sum(self.num_embeds_by_hash.get(h, 0) for h in refs)

    # --- progress bounds (SYS-8) ---------------------------------------------------------

    def solo_bound(self, request_id: str) -> int:
        """Steps within which a request alone in the engine finishes, from its current
        progress: ``⌈(P + g − c)/T⌉ + k`` to catch up with its ``P + g`` tokens (g
        generated so far, recomputed after a preemption; k: items ending after c), the
        last of which samples token g + 1, plus one step per token left after that.
        Decoding (``c = P + g − 1``, g ≥ 1) this is ``max_new_tokens − g``."""
        facts = self.facts[request_id]
        progress = self.progress[request_id]
        c, g = progress.computed, progress.outputs
        items = facts.items_ending_after(c)
        catch_up = self.catch_up(facts.num_tokens(g) - c, items)
        # async scheduling: the step in flight, and per item one step more (its
        # predecessor's reference is released by the update after the next schedule)
        pipeline = 1 + items if self.config.async_scheduling else 0
        decodes = facts.request.max_new_tokens - g - 1
        return catch_up + items + decodes * self.steps_per_decode() + pipeline

    def catch_up(self, span: int, items: int) -> int:
        """Chunks that compute ``span`` positions: ``⌈span/T⌉``. A hybrid model's chunks
        (SYS-16) are cut to whole blocks, ``T' = ⌊T/bs⌋·bs`` tokens (with ``T < bs``, at
        most ``⌈bs/T⌉`` chunks a block); and a chunk stopped inside a block at an item's
        doorstep is followed by one to the block's end, so each item may add one more
        short chunk, as may a start inside a block and the stop at the last boundary a
        prefix hit can use."""
        budget, block = self.config.token_budget, self.config.block_size
        if not self.config.mamba_block_aligned:
            return ceil_div(span, budget)
        if budget >= block:
            chunks = ceil_div(span, budget // block * block)
        else:
            chunks = (ceil_div(span, block) + 1) * ceil_div(block, budget)
        return chunks + items + 2

    def steps_per_decode(self) -> int:
        """Steps a decode may take: one; with async scheduling and a drafter two (a
        request whose step in flight finishes it if its drafts are accepted may wait for
        that step's output before it is scheduled again)."""
        both = self.config.async_scheduling and self.config.num_speculative_tokens
        return 2 if both else 1

    def drain_bound(self) -> int:
        """Steps within which every unfinished request finishes when none arrives: the
        sum of their solo bounds from scratch, once more for each request that may be
        preempted and recompute (a generous liveness bound, not a performance target).
        A request preempted after generating g tokens recomputes ``P + g`` of them in at
        most ``⌈P/T⌉ + g`` steps and then needs ``max_new_tokens − g − 1`` more: within
        its term ``⌈P/T⌉ + items + max_new_tokens``, so the bound is the same."""
        live = self.live
        solo_from_scratch = 0
        for request_id in live:
            facts = self.facts[request_id]
            items = len(facts.request.items) * (2 if self.config.async_scheduling else 1)
            solo_from_scratch += (
                self.catch_up(facts.num_prompt_tokens, len(facts.request.items))
                + items
                + facts.request.max_new_tokens * self.steps_per_decode()
            )
        pipeline = 1 if self.config.async_scheduling else 0  # the step in flight
        return solo_from_scratch * (len(live) + 1) + pipeline

"""The encoder-scheduling hook (SCH-1..11): which images to encode this step, and
where the chunk must stop.

Mirrors vLLM's ``Scheduler._try_schedule_encoder_inputs`` as of v0.33.0 (the
``disable_chunked_mm_input`` check uses ``<=`` and runs before the cache check, and
its rollback accounts for the drafter shift) and ``compute_mm_encoder_budget``, with one
difference SPEC.md SCH-6 states: the rollback never ends inside the previous item.
"""

from __future__ import annotations

from collections.abc import Mapping

from reference.encoder_cache import check_count
from spec.components import EncoderCacheManager
from spec.errors import BudgetConfigError, EmbedCountMismatchError, InvalidInputError
from spec.types import EncoderBudgetConfig, RequestView, ScheduleDecision, SchedulerConfig


class SchedulingHook:
    """``spec.components.SchedulingHook``, built from a ``SchedulerConfig``.

    The hook reads and updates the cache manager through ``check_and_update_cache``
    (a hit takes a reference) and ``can_allocate`` (which may evict), but never calls
    ``allocate``: the caller allocates ``encoder_inputs_to_schedule``, then calls
    ``check_and_update_cache`` for ``duplicate_encoder_inputs``, as vLLM's
    ``_allocate_encoder_inputs`` does.
    """

    def __init__(self, config: SchedulerConfig) -> None:
        if not isinstance(config, SchedulerConfig):
            raise InvalidInputError(
                f"config must be a SchedulerConfig, got {type(config).__name__}"
            )
        self._disable_chunked_mm_input = bool(config.disable_chunked_mm_input)

    def try_schedule_encoder_inputs(
        self,
        request: RequestView,
        num_computed_tokens: int,
        num_new_tokens: int,
        encoder_compute_budget: int,
        cache: EncoderCacheManager,
        shift_computed_tokens: int = 0,
    ) -> ScheduleDecision:
        """For each item overlapping ``[computed, computed + new + shift)``, in offset
        order (SCH-1): with chunking disabled, roll a chunk that would end inside the
        item back before it (SCH-6); a hash already planned this call is a duplicate
        (SCH-3); a held hash is free (SCH-2); an affordable one is scheduled whole
        (SCH-4) unless the window holds none of its embedding rows; otherwise the
        chunk stops at the item's doorstep (SCH-5). Budget is charged per scheduled
        item (SCH-7)."""
        if not isinstance(request, RequestView):
            raise InvalidInputError(f"request must be a RequestView, got {type(request).__name__}")
        computed = check_count("num_computed_tokens", num_computed_tokens)
        new = check_count("num_new_tokens", num_new_tokens)
        budget = check_count("encoder_compute_budget", encoder_compute_budget)
        shift = check_count("shift_computed_tokens", shift_computed_tokens)
        if new == 0 or not request.items:
            return ScheduleDecision((), new, budget)

        to_schedule: list[int] = []
        duplicates: list[int] = []
        planned: dict[str, int] = {}  # mm_hash -> num_embeds of the items scheduled here
        num_embeds_to_schedule = 0
        # The drafter (EAGLE) reads `shift` positions ahead: they need embeddings too.
        window_end = computed + new + shift

        for input_id, item in enumerate(request.items):
            offset, length = item.mm_position.offset, item.mm_position.length
            if offset >= window_end:
                break  # items are sorted: nothing further overlaps (SCH-1)
            if offset + length <= computed:
                continue  # already in the KV cache (SCH-1)

            # SCH-6: a chunk starting at or before the item must not end inside it.
            if self._disable_chunked_mm_input and (
                computed <= offset and computed + new < offset + length
            ):
                new = min(new, self.rolled_back(request, input_id, computed, shift))
                break

            if item.mm_hash in planned:  # SCH-3: encoded once this step, shared
                if planned[item.mm_hash] != item.num_embeds:
                    raise EmbedCountMismatchError(
                        f"request {request.request_id} item {input_id} presents "
                        f"{item.mm_hash} with {item.num_embeds} embeddings, but an earlier "
                        f"item of the same request has {planned[item.mm_hash]}"
                    )
                duplicates.append(input_id)
                continue

            if cache.check_and_update_cache(request, input_id):
                continue  # SCH-2: held, now referenced, free of charge

            if not cache.can_allocate(request, input_id, budget, num_embeds_to_schedule):
                # SCH-5: stop at the doorstep. No drafter shift here: its read-ahead into
                # the unencoded item falls back to token embeddings. Past the doorstep (a
                # prefix-cache hit ending inside the item) nothing can run this step.
                new = min(new, offset - computed) if computed < offset else 0
                break

            # Rows of this item the window covers; none (only break tokens) -> no encode.
            start_idx = max(0, computed - offset)
            end_idx = min(length, window_end - offset)
            first_row, end_row = item.mm_position.get_embeds_indices_in_range(start_idx, end_idx)
            if end_row == first_row:
                continue

            # SCH-4: the whole item is charged, however little of it the chunk uses.
            num_embeds_to_schedule += item.num_embeds
            budget -= item.num_embeds
            planned[item.mm_hash] = item.num_embeds
            to_schedule.append(input_id)

        return ScheduleDecision(
            encoder_inputs_to_schedule=tuple(to_schedule),
            num_new_tokens=new,
            encoder_compute_budget=budget,
            duplicate_encoder_inputs=tuple(duplicates),
        )

    @staticmethod
    def rolled_back(request: RequestView, input_id: int, computed: int, shift: int) -> int:
        """SCH-6's rollback before item ``input_id``: ``offset - computed - s``, keeping
        the drafter's look-ahead out of the item too, where that leaves a chunk (else
        ``offset - computed``: cut to 0, the request would be cut to 0 at every later
        step, and never finish); but where that would end
        strictly inside the previous item (one the chunk started at or before, and
        covered whole), the chunk ends at that item's end instead. The look-ahead is
        trimmed from text, never from an image: with adjacent images, subtracting the
        shift would cut the earlier image in half (vLLM 0.33.0 does; SPEC.md SCH-6)."""
        offset = request.items[input_id].mm_position.offset
        room = offset - computed
        # never cut to 0 for the look-ahead: the next step would be cut the same way
        new = room - shift if room - shift > 0 else max(0, room)
        if input_id > 0:
            previous = request.items[input_id - 1].mm_position
            if computed <= previous.offset < computed + new < previous.end:
                new = previous.end - computed
        return new

    def compute_mm_encoder_budget(
        self, config: EncoderBudgetConfig, max_tokens_per_item: Mapping[str, int]
    ) -> tuple[int, int]:
        """``(encoder_compute_budget, encoder_cache_size)``, each the configured value
        raised to the largest item, so the worst-case item always fits (SCH-9)."""
        if not isinstance(config, EncoderBudgetConfig):
            raise InvalidInputError(
                f"config must be an EncoderBudgetConfig, got {type(config).__name__}"
            )
        configured_budget = check_count(
            "max_num_encoder_input_tokens", config.max_num_encoder_input_tokens
        )
        configured_cache = check_count("encoder_cache_size", config.encoder_cache_size)
        max_batched = check_count("max_num_batched_tokens", config.max_num_batched_tokens)
        if not isinstance(max_tokens_per_item, Mapping):
            raise InvalidInputError(
                "max_tokens_per_item must map modality to tokens, got "
                f"{type(max_tokens_per_item).__name__}"
            )
        for modality, tokens in max_tokens_per_item.items():
            check_count(f"max_tokens_per_item[{modality!r}]", tokens)
        if not max_tokens_per_item:
            return 0, 0  # no multimodal input: no encoder budget, no cache
        largest = max(max_tokens_per_item.values())
        if config.disable_chunked_mm_input and largest > max_batched:
            raise BudgetConfigError(
                f"chunked multimodal input is disabled but the largest item has {largest} "
                f"tokens, more than max_num_batched_tokens ({max_batched}): it could never "
                "be scheduled; increase max_num_batched_tokens"
            )
        return max(configured_budget, largest), max(configured_cache, largest)

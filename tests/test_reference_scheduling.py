"""Unit tests of the reference encoder-scheduling hook (SCH-1..11)."""

from __future__ import annotations

from typing import Any

import pytest

from reference.encoder_cache import EncoderCacheManager
from reference.scheduling import SchedulingHook
from spec.errors import BudgetConfigError, EmbedCountMismatchError, InvalidInputError
from spec.types import (
    EncoderBudgetConfig,
    MultiModalItem,
    PlaceholderRange,
    RequestView,
    ScheduleDecision,
    SchedulerConfig,
)

HOOK = SchedulingHook(SchedulerConfig())
STRICT = SchedulingHook(SchedulerConfig(disable_chunked_mm_input=True))


def item(mm_hash: str, offset: int, length: int, embeds: str | None = None) -> MultiModalItem:
    """``embeds``: an is_embed mask written as a string of 1s and 0s."""
    mask = None if embeds is None else tuple(bit == "1" for bit in embeds)
    return MultiModalItem(mm_hash, PlaceholderRange(offset, length, mask))


def two_images(request_id: str = "r1") -> RequestView:
    """Text [0, 10), A [10, 30), text [30, 40), B [40, 50), text [50, 60)."""
    return RequestView(request_id, (item("A", 10, 20), item("B", 40, 10)))


def decision(
    scheduled: tuple[int, ...], new: int, budget: int, duplicates: tuple[int, ...] = ()
) -> ScheduleDecision:
    return ScheduleDecision(scheduled, new, budget, duplicates)


def hold(cache: EncoderCacheManager, request: RequestView, input_id: int) -> None:
    """Put an item's entry in the cache, unreferenced (another request used it)."""
    other = RequestView("other", (request.items[input_id],))
    assert cache.can_allocate(other, 0, 10**6, 0)
    cache.allocate(other, 0)
    cache.free(other)


def test_no_new_tokens_or_no_items_changes_nothing() -> None:
    cache = EncoderCacheManager(100)
    assert HOOK.try_schedule_encoder_inputs(two_images(), 10, 0, 7, cache) == decision((), 0, 7)
    text_only = RequestView("t", ())
    assert HOOK.try_schedule_encoder_inputs(text_only, 0, 9, 7, cache) == decision((), 9, 7)


def test_only_overlapping_items_are_touched() -> None:
    cache = EncoderCacheManager(100)
    # Window [30, 40): after A, before B.
    assert HOOK.try_schedule_encoder_inputs(two_images(), 30, 10, 100, cache) == decision(
        (), 10, 100
    )
    assert dict(cache.cached) == {}


def test_entering_an_item_schedules_it_whole_and_does_not_allocate() -> None:
    cache = EncoderCacheManager(100)
    got = HOOK.try_schedule_encoder_inputs(two_images(), 0, 15, 100, cache)
    assert got == decision((0,), 15, 80)  # 5 of A's 20 positions, all 20 charged
    assert dict(cache.cached) == {}  # the caller allocates


def test_items_are_scheduled_in_offset_order() -> None:
    cache = EncoderCacheManager(100)
    got = HOOK.try_schedule_encoder_inputs(two_images(), 0, 60, 100, cache)
    assert got == decision((0, 1), 60, 70)


def test_held_items_are_free_and_referenced() -> None:
    cache = EncoderCacheManager(100)
    request = two_images()
    hold(cache, request, 0)
    got = HOOK.try_schedule_encoder_inputs(request, 0, 35, 0, cache)
    assert got == decision((), 35, 0)
    assert cache.cached["A"] == frozenset({"r1"})


def test_same_content_twice_in_one_step_is_encoded_once() -> None:
    cache = EncoderCacheManager(100)
    request = RequestView("r1", (item("A", 0, 5), item("A", 6, 5), item("C", 12, 3)))
    got = HOOK.try_schedule_encoder_inputs(request, 0, 15, 8, cache)
    assert got == decision((0, 2), 15, 0, duplicates=(1,))


def test_duplicate_with_another_count_is_rejected() -> None:
    cache = EncoderCacheManager(100)
    request = RequestView("r1", (item("A", 0, 5), item("A", 6, 4)))
    with pytest.raises(EmbedCountMismatchError, match="A"):
        HOOK.try_schedule_encoder_inputs(request, 0, 10, 100, cache)


def test_unaffordable_item_truncates_at_its_doorstep() -> None:
    cache = EncoderCacheManager(100)
    got = HOOK.try_schedule_encoder_inputs(two_images(), 0, 60, 25, cache)
    # A (20) fits, B (10) does not fit the remaining 5: stop at B's offset, 40.
    assert got == decision((0,), 40, 5)


def test_no_cache_space_truncates_too() -> None:
    cache = EncoderCacheManager(15)
    got = HOOK.try_schedule_encoder_inputs(two_images(), 5, 20, 100, cache)
    assert got == decision((), 5, 100)


def test_a_prefix_hit_inside_an_unaffordable_item_runs_nothing() -> None:
    cache = EncoderCacheManager(100)
    got = HOOK.try_schedule_encoder_inputs(two_images(), 15, 10, 0, cache)
    assert got == decision((), 0, 0)


def test_truncation_never_grows_the_chunk() -> None:
    cache = EncoderCacheManager(100)
    # B starts at 40; the chunk [20, 39) with a read-ahead of 2 reaches it. The doorstep
    # is 20 tokens away, but the chunk stays at 19.
    request = RequestView("r1", (item("B", 40, 10),))
    got = HOOK.try_schedule_encoder_inputs(request, 20, 19, 0, cache, shift_computed_tokens=2)
    assert got == decision((), 19, 0)


def test_the_drafter_shift_extends_the_window() -> None:
    cache = EncoderCacheManager(100)
    request = RequestView("r1", (item("B", 40, 10),))
    assert HOOK.try_schedule_encoder_inputs(request, 30, 10, 100, cache) == decision((), 10, 100)
    got = HOOK.try_schedule_encoder_inputs(request, 30, 10, 100, cache, shift_computed_tokens=1)
    assert got == decision((0,), 10, 90)


def test_a_window_with_no_embedding_rows_encodes_nothing() -> None:
    cache = EncoderCacheManager(100)
    # Positions 0..3 of the item: embeds at 0, 1 and 3; position 2 is a row break.
    request = RequestView("r1", (item("A", 0, 4, "1101"),))
    assert HOOK.try_schedule_encoder_inputs(request, 2, 1, 100, cache) == decision((), 1, 100)
    assert HOOK.try_schedule_encoder_inputs(request, 2, 2, 100, cache) == decision((0,), 2, 97)


def test_disabled_chunking_rolls_back_before_the_item() -> None:
    cache = EncoderCacheManager(100)
    # The chunk [0, 35) would end inside A [10, 30)? No: it covers A whole.
    assert STRICT.try_schedule_encoder_inputs(two_images(), 0, 35, 100, cache) == decision(
        (0,), 35, 80
    )
    # [0, 25) ends inside A: rolled back to A's offset, nothing scheduled.
    assert STRICT.try_schedule_encoder_inputs(two_images(), 0, 25, 100, cache) == decision(
        (), 10, 100
    )


def test_disabled_chunking_applies_at_the_offset_itself_and_to_held_items() -> None:
    cache = EncoderCacheManager(100)
    request = two_images()
    hold(cache, request, 0)
    # Starts exactly at A's offset and ends inside it: `<=`, and before the cache check.
    got = STRICT.try_schedule_encoder_inputs(request, 10, 5, 100, cache)
    assert got == decision((), 0, 100)
    assert cache.cached["A"] == frozenset()  # not even referenced


def test_disabled_chunking_rollback_accounts_for_the_shift() -> None:
    cache = EncoderCacheManager(100)
    got = STRICT.try_schedule_encoder_inputs(two_images(), 0, 25, 100, cache, 1)
    assert got == decision((), 9, 100)


def test_continuing_inside_an_item_is_not_rolled_back() -> None:
    cache = EncoderCacheManager(100)
    request = two_images()
    hold(cache, request, 0)
    got = STRICT.try_schedule_encoder_inputs(request, 15, 5, 0, cache)
    assert got == decision((), 5, 0)


@pytest.mark.parametrize(
    "args",
    [
        (-1, 5, 5, 0),
        (0, -5, 5, 0),
        (0, 5, -1, 0),
        (0, 5, 5, -1),
        (0.5, 5, 5, 0),
        (0, True, 5, 0),
    ],
)
def test_negative_or_non_int_arguments(args: tuple[Any, Any, Any, Any]) -> None:
    computed, new, budget, shift = args
    with pytest.raises(InvalidInputError):
        HOOK.try_schedule_encoder_inputs(
            two_images(), computed, new, budget, EncoderCacheManager(10), shift
        )


def test_bad_request_and_config() -> None:
    with pytest.raises(InvalidInputError, match="RequestView"):
        HOOK.try_schedule_encoder_inputs("r1", 0, 5, 5, EncoderCacheManager(10))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="SchedulerConfig"):
        SchedulingHook(None)  # type: ignore[arg-type]


# --- budget sizing (SCH-9, SCH-10) -----------------------------------------------------


def budget_config(
    compute: int, cache: int, batched: int, strict: bool = False
) -> EncoderBudgetConfig:
    return EncoderBudgetConfig(compute, cache, batched, disable_chunked_mm_input=strict)


def test_budget_sizing_raises_to_the_largest_item() -> None:
    assert HOOK.compute_mm_encoder_budget(budget_config(100, 50, 64), {"image": 80}) == (100, 80)
    assert HOOK.compute_mm_encoder_budget(
        budget_config(10, 500, 64), {"image": 8, "video": 90}
    ) == (
        90,
        500,
    )
    assert HOOK.compute_mm_encoder_budget(budget_config(10, 10, 64), {}) == (0, 0)


def test_budget_sizing_rejects_an_item_that_can_never_be_scheduled() -> None:
    config = budget_config(100, 100, 64, strict=True)
    assert HOOK.compute_mm_encoder_budget(config, {"image": 64}) == (100, 100)
    with pytest.raises(BudgetConfigError, match="max_num_batched_tokens"):
        HOOK.compute_mm_encoder_budget(config, {"image": 65})


@pytest.mark.parametrize(
    ("config", "items"),
    [
        (None, {"image": 1}),
        (budget_config(-1, 1, 1), {"image": 1}),
        (budget_config(1, 1, 1), {"image": -1}),
        (budget_config(1, 1, 1), [("image", 1)]),
    ],
)
def test_budget_sizing_bad_input(config: object, items: object) -> None:
    with pytest.raises(InvalidInputError):
        HOOK.compute_mm_encoder_budget(config, items)  # type: ignore[arg-type]


@pytest.mark.parametrize("hook", [HOOK, STRICT], ids=["chunked", "unchunked"])
def test_progress_with_a_sized_budget(hook: SchedulingHook) -> None:
    request = two_images()
    compute, cache_size = hook.compute_mm_encoder_budget(
        budget_config(0, 0, 25, strict=hook is STRICT), {"image": 20}
    )
    for computed in range(60):
        cache = EncoderCacheManager(cache_size)
        new = min(60 - computed, 25)
        got = hook.try_schedule_encoder_inputs(request, computed, new, compute, cache)
        assert got.num_new_tokens >= 1, (computed, got)

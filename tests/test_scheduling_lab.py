"""The seven scenarios of lab 13-03 (seed 003), against the reference hook.

One prompt, text/image/text/image/text (docs/lab_scenarios.md has the numbers and
the intent of each scenario):

    [0, 10) text | A: [10, 110), 100 tokens | [110, 130) text | B: [130, 180), 50 tokens
    | [180, 200) text
"""

from __future__ import annotations

from reference.encoder_cache import EncoderCacheManager
from reference.scheduling import SchedulingHook
from spec.types import (
    EncoderBudgetConfig,
    MultiModalItem,
    PlaceholderRange,
    RequestView,
    ScheduleDecision,
    SchedulerConfig,
)

PROMPT_LEN = 200
IMAGE_A = MultiModalItem("image-A", PlaceholderRange(offset=10, length=100))
IMAGE_B = MultiModalItem("image-B", PlaceholderRange(offset=130, length=50))
ROOMY_CACHE = 1000  # encoder cache space is not the constraint unless a test says so

HOOK = SchedulingHook(SchedulerConfig())


def lab_request(request_id: str = "lab") -> RequestView:
    return RequestView(request_id, (IMAGE_A, IMAGE_B))


def plan(
    computed: int, new: int, budget: int, cache: EncoderCacheManager, request: RequestView
) -> ScheduleDecision:
    """One step of the hook, then what the scheduler does with its decision."""
    got = HOOK.try_schedule_encoder_inputs(request, computed, new, budget, cache)
    for input_id in got.encoder_inputs_to_schedule:
        cache.allocate(request, input_id)
    return got


def test_pure_text_chunk_is_unconstrained() -> None:
    cache = EncoderCacheManager(ROOMY_CACHE)
    # Leading text [0, 10) with no encoder budget at all: untouched.
    got = plan(0, 10, 0, cache, lab_request())
    assert got == ScheduleDecision((), num_new_tokens=10, encoder_compute_budget=0)
    # The text between the images [110, 130), A already consumed: untouched too.
    got = plan(110, 20, 0, cache, lab_request())
    assert got == ScheduleDecision((), num_new_tokens=20, encoder_compute_budget=0)
    assert dict(cache.cached) == {}


def test_entering_an_image_schedules_its_encoder() -> None:
    cache = EncoderCacheManager(ROOMY_CACHE)
    # [0, 50) consumes 40 of A's 100 positions, but A is encoded (and charged) whole.
    got = plan(0, 50, 150, cache, lab_request())
    assert got == ScheduleDecision((0,), num_new_tokens=50, encoder_compute_budget=50)
    assert cache.num_free_slots == ROOMY_CACHE - 100


def test_unaffordable_image_truncates_the_chunk() -> None:
    # Budget 99 < 100: the chunk stops at A's doorstep and the encoder runs empty.
    cache = EncoderCacheManager(ROOMY_CACHE)
    got = plan(0, 50, 99, cache, lab_request())
    assert got == ScheduleDecision((), num_new_tokens=10, encoder_compute_budget=99)
    # The same stall when the budget is there but the encoder cache has no room.
    small_cache = EncoderCacheManager(80)
    got = plan(0, 50, 150, small_cache, lab_request())
    assert got == ScheduleDecision((), num_new_tokens=10, encoder_compute_budget=150)
    assert dict(cache.cached) == {} and dict(small_cache.cached) == {}


def test_cached_image_costs_nothing() -> None:
    cache = EncoderCacheManager(ROOMY_CACHE)
    # Another request encoded the same picture and has finished: A is held, unreferenced.
    earlier = RequestView("earlier", (IMAGE_A,))
    plan(0, 50, 150, cache, earlier)
    cache.free(earlier)
    got = plan(0, 50, 0, cache, lab_request())  # zero budget, yet the full chunk
    assert got == ScheduleDecision((), num_new_tokens=50, encoder_compute_budget=0)
    assert cache.cached["image-A"] == frozenset({"lab"})


def test_continuation_mid_placeholder_needs_no_new_encode() -> None:
    cache = EncoderCacheManager(ROOMY_CACHE)
    request = lab_request()
    first = plan(0, 50, 150, cache, request)  # A encoded whole, 40 positions consumed
    assert first.encoder_inputs_to_schedule == (0,)
    # The next chunks start inside A: served from the cache with no encoder budget.
    got = plan(50, 50, 0, cache, request)
    assert got == ScheduleDecision((), num_new_tokens=50, encoder_compute_budget=0)
    got = plan(100, 30, 0, cache, request)  # A's tail and the middle text
    assert got == ScheduleDecision((), num_new_tokens=30, encoder_compute_budget=0)


def test_budget_splits_across_two_images() -> None:
    # Budget 120 covers A (100) but not then B (50): A scheduled, B deferred, the chunk
    # truncated between them at B's offset, 130.
    cache = EncoderCacheManager(ROOMY_CACHE)
    request = lab_request()
    got = plan(0, PROMPT_LEN, 120, cache, request)
    assert got == ScheduleDecision((0,), num_new_tokens=130, encoder_compute_budget=20)
    # Next step, a fresh budget: B is encoded and the prefill completes.
    got = plan(130, 70, 120, cache, request)
    assert got == ScheduleDecision((1,), num_new_tokens=70, encoder_compute_budget=70)
    # With budget 150 the whole prompt prefills in one step with two encodes.
    got = plan(0, PROMPT_LEN, 150, EncoderCacheManager(ROOMY_CACHE), lab_request("other"))
    assert got == ScheduleDecision((0, 1), num_new_tokens=200, encoder_compute_budget=0)


def test_progress_is_always_possible() -> None:
    cache = EncoderCacheManager(ROOMY_CACHE)
    request = lab_request()
    # At A's doorstep with zero encoder budget: a 0-token chunk, the request waits...
    assert plan(10, 50, 0, cache, request).num_new_tokens == 0
    # ...an image at position 0 waits the same way...
    image_first = RequestView("image-first", (MultiModalItem("image-C", PlaceholderRange(0, 30)),))
    assert plan(0, 30, 0, cache, image_first).num_new_tokens == 0
    # ...and the next step's fresh budget lets it through: a delay, not a deadlock.
    assert plan(10, 50, 150, cache, request).num_new_tokens == 50

    # A budget sized by compute_mm_encoder_budget always admits the largest item, so a
    # step-by-step prefill (64-token chunks) never stalls and ends in 4 steps.
    compute_budget, cache_size = HOOK.compute_mm_encoder_budget(
        EncoderBudgetConfig(
            max_num_encoder_input_tokens=0, encoder_cache_size=0, max_num_batched_tokens=64
        ),
        {"image": 100},
    )
    assert (compute_budget, cache_size) == (100, 100)
    cache = EncoderCacheManager(cache_size)
    request = lab_request("sized")
    computed, chunks = 0, []
    while computed < PROMPT_LEN:
        got = plan(computed, min(64, PROMPT_LEN - computed), compute_budget, cache, request)
        assert got.num_new_tokens >= 1, f"stalled at {computed}"
        computed += got.num_new_tokens
        chunks.append((got.num_new_tokens, got.encoder_inputs_to_schedule))
        # The scheduler releases items the prefill has moved past.
        for input_id in sorted(cache.get_cached_input_ids(request)):
            if request.items[input_id].mm_position.end <= computed:
                cache.free_encoder_input(request, input_id)
    # Step 3 needs room for B: A (consumed, released at step 2) is evicted for it.
    assert chunks == [(64, (0,)), (64, ()), (64, (1,)), (8, ())]
    assert cache.get_freed_mm_hashes() == ["image-A"]

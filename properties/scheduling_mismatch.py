"""SCH-11: a count mismatch rejects the request's step.

An item whose ``mm_hash`` an earlier item of the same call scheduled, or the cache
manager holds, with another ``num_embeds`` (a client-provided multimodal UUID reused for
different content) must make the hook raise ``EmbedCountMismatchError``, leaving the
cache as the walk left it before that item; and a hash that is neither (never held, or
evicted since) must not. The scenarios carry a *twin* (the hash of another image with
another count) that other requests may hold, release or have evicted.
"""

from __future__ import annotations

import copy
import itertools

from hypothesis import example, given, note

from properties.framework import Parts, Runnable, check, clause_property, stateless
from properties.models.encoder_cache import EncoderCacheModel
from properties.models.scheduling import ExpectedDecision, expected_decision
from properties.scheduling import (
    SCH_SUBJECT,
    SCH_USES,
    cache_state,
    model_state,
    prepare_cache,
    referenced_hashes,
)
from properties.scheduling_strategies import (
    REQUEST_ID,
    CacheOp,
    HookScenario,
    describe_item,
    hook_scenarios,
)
from spec.errors import EmbedCountMismatchError
from spec.types import (
    MultiModalItem,
    PlaceholderRange,
    RequestView,
    ScheduleDecision,
    SchedulerConfig,
)

#: The choices SPEC.md leaves open (an affordable item whose window holds none of its
#: rows may be scheduled or not) decide whether a later twin meets a scheduled hash; a
#: rejected call does not say which it made, so every combination of up to this many
#: such items is tried.
_MAX_OPEN_CHOICES = 4


def _expectations(
    scenario: HookScenario, model: EncoderCacheModel, scheduled: frozenset[int] | None
) -> list[tuple[ExpectedDecision, EncoderCacheModel]]:
    """The decisions SPEC.md allows, each with the cache model after its walk: for the
    implementation's own choice (``scheduled``), or for every choice when it raised."""

    def walk(choice: frozenset[int]) -> tuple[ExpectedDecision, EncoderCacheModel]:
        after = copy.deepcopy(model)
        decision = expected_decision(
            scenario.request,
            scenario.num_computed_tokens,
            scenario.num_new_tokens,
            scenario.encoder_compute_budget,
            after,
            scenario.shift,
            scenario.disable_chunked_mm_input,
            scheduled_by_impl=choice,
        )
        return decision, after

    if scheduled is not None:
        return [walk(scheduled)]
    first = walk(frozenset())
    open_items = [i for i, o in first[0].outcomes.items() if o == "no_rows"]
    choices = itertools.chain.from_iterable(
        itertools.combinations(open_items[:_MAX_OPEN_CHOICES], k)
        for k in range(1, min(len(open_items), _MAX_OPEN_CHOICES) + 1)
    )
    return [first, *(walk(frozenset(c)) for c in choices)]


def _show(decision: ScheduleDecision) -> str:
    return (
        f"encode {list(decision.encoder_inputs_to_schedule)}, duplicates "
        f"{list(decision.duplicate_encoder_inputs)}, new {decision.num_new_tokens}, budget "
        f"left {decision.encoder_compute_budget}"
    )


def _why(scenario: HookScenario, expected: ExpectedDecision) -> str:
    """Which item is mismatched, and against what."""
    assert expected.stop is not None
    k = expected.stop[1]
    item = scenario.request.items[k]
    earlier = [
        i for i in expected.scheduled if scenario.request.items[i].mm_hash == item.mm_hash
    ]
    against = (
        f"item {earlier[0]} scheduled it earlier in this call with "
        f"{scenario.request.items[earlier[0]].num_embeds}"
        if earlier
        else "the cache holds it with another count"
    )
    return f"item {describe_item(k, item)} carries {item.mm_hash}, but {against}"


def count_mismatch_rejected(parts: Parts, scenario: HookScenario) -> None:
    for line in scenario.describe():
        note(line)
    cache, model = prepare_cache(
        parts.encoder_cache_manager, scenario.cache_size, scenario.requests(), scenario.prep
    )
    note(
        f"cache before the step: held {dict(model.sizes)}, freeable oldest-first "
        f"{list(model.freeable)}; {REQUEST_ID} references "
        f"{sorted(referenced_hashes(cache, REQUEST_ID))}"
    )
    hook = parts.scheduling_hook(
        SchedulerConfig(disable_chunked_mm_input=scenario.disable_chunked_mm_input)
    )
    decision: ScheduleDecision | None = None
    try:
        decision = hook.try_schedule_encoder_inputs(
            scenario.request,
            scenario.num_computed_tokens,
            scenario.num_new_tokens,
            scenario.encoder_compute_budget,
            cache,
            scenario.shift,
        )
        note(f"the hook decided: {_show(decision)}")
    except EmbedCountMismatchError as e:
        note(f"the hook rejected the step: EmbedCountMismatchError: {e}")
    scheduled = None if decision is None else frozenset(decision.encoder_inputs_to_schedule)
    allowed = _expectations(scenario, model, scheduled)
    rejecting = [(d, m) for d, m in allowed if d.stop is not None and d.stop[0] == "mismatch"]
    if decision is not None:
        expected = allowed[0][0]
        check(
            not rejecting,
            "SCH-11",
            f"{_why(scenario, expected) if rejecting else ''}: the request's step must be "
            f"rejected (EmbedCountMismatchError; vLLM: new 0, nothing scheduled, the request "
            f"recorded in encoder_cache_mismatch_reqs); the hook "
            f"returned {_show(decision)}",
        )
        return
    check(
        bool(rejecting),
        "SCH-11",
        "the hook rejected the step with EmbedCountMismatchError, but no item it reaches "
        "carries a hash scheduled earlier in the call or held with another count "
        f"(items: {', '.join(f'{i}: {o}' for i, o in allowed[0][0].outcomes.items())})",
    )
    got = cache_state(cache)
    wants = [model_state(m) for _, m in rejecting]
    check(
        got in wants,
        "SCH-11",
        f"{_why(scenario, rejecting[0][0])}; the step is rejected, so the cache must stay as "
        f"the walk left it before that item (no reference taken for it, the held entry "
        f"keeping its size): (cached, freeable, free, freeable slots) is {got}; expected "
        f"{wants[0]}",
    )


def _scenario(
    items: tuple[tuple[str, int, int], ...],
    others: tuple[RequestView, ...],
    prep: tuple[CacheOp, ...],
    cache_size: int,
    new: int,
) -> HookScenario:
    """A request of ``(hash, offset, length)`` items from position 0, ``new`` tokens."""
    request = RequestView(
        REQUEST_ID,
        tuple(MultiModalItem(h, PlaceholderRange(off, n)) for h, off, n in items),
    )
    return HookScenario(
        request=request,
        prompt_len=request.items[-1].mm_position.end,
        cache_size=cache_size,
        others=others,
        prep=prep,
        num_computed_tokens=0,
        num_new_tokens=new,
        encoder_compute_budget=8,
        shift=0,
        disable_chunked_mm_input=False,
    )


_HOLDER = RequestView("o1", (MultiModalItem("A", PlaceholderRange(0, 1)),))
_OTHER = RequestView("o2", (MultiModalItem("B", PlaceholderRange(0, 2)),))
#: A scheduled with 1 embedding, then A again with 2 in the same call.
_IN_STEP = _scenario((("A", 0, 1), ("A", 1, 2)), (), (), 4, 3)
#: A held (by o1) with 1 embedding, presented with 2.
_HELD = _scenario((("A", 0, 2),), (_HOLDER,), (CacheOp("take", "o1"),), 4, 2)
#: A held with 1, released and evicted for B: presented with 2 it is no mismatch.
_EVICTED = _scenario(
    (("A", 0, 2),),
    (_HOLDER, _OTHER),
    (
        CacheOp("take", "o1"),
        CacheOp("finish", "o1"),
        CacheOp("take", "o2"),
        CacheOp("finish", "o2"),
    ),
    2,
    2,
)


@clause_property("sch_count_mismatch_rejected", "SCH-11", subject=SCH_SUBJECT, uses=SCH_USES)
def sch_count_mismatch_rejected(parts: Parts) -> Runnable:
    """SCH-11: a hash met with another count (scheduled earlier in the call, or held)
    rejects the step and leaves the cache as it was before that item; an evicted or
    never-held hash does not."""

    @given(scenario=hook_scenarios(None, "mismatch"))
    @example(scenario=_IN_STEP)
    @example(scenario=_HELD)
    @example(scenario=_EVICTED)
    def test(scenario: HookScenario) -> None:
        count_mismatch_rejected(parts, scenario)

    return stateless(test)

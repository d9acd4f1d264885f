"""The checks of ``EncoderDecoderCacheMachine``, one group per clause (ECD-1..6), each
readable as its clause in SPEC.md: the implementation's observable state against the
model's (:mod:`properties.models.encoder_decoder_cache`) around one operation or after a
step.

Each operation's effect on ``num_free_slots`` is judged by the clause of that
operation (an allocation by ECD-1, or ECD-3 when another live allocation carries its
hash; a release by ECD-2; ``can_allocate`` by ECD-4; ``reset`` by ECD-6), so that a
wrong count is reported under the clause whose promise broke, and the invariant's ECD-1
check after every step catches the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from properties.framework import answers, check
from properties.models.encoder_decoder_cache import Allocation, EncoderDecoderCacheModel
from spec.components import EncoderDecoderCacheManager
from spec.types import RequestView


def snapshot(impl: EncoderDecoderCacheManager, requests: Sequence[RequestView]) -> tuple[Any, ...]:
    """Everything observable about the implementation, as plain values (the listings:
    the same calls as a loop, one exchange when the manager is isolated:
    :func:`properties.framework.answers`)."""
    free = impl.num_free_slots
    listings = answers(impl.get_cached_input_ids, ((req,) for req in requests))
    return (free, tuple(sorted(listed) for listed in listings))


# --- ECD-1: slot accounting -------------------------------------------------------------------


def ecd1_slots(model: EncoderDecoderCacheModel, free: int) -> None:
    """``free`` (the implementation's ``num_free_slots``) is the cache size less what
    the live allocations charge, within [0, cache_size]."""
    cap = model.cache_size
    charged = {f"{rid} item {i}": a.num_embeds for (rid, i), a in model.allocations.items()}
    check(
        free == model.num_free_slots and 0 <= free <= cap,
        "ECD-1",
        f"num_free_slots is {free}; the cache size {cap} less the live allocations "
        f"{charged} is {model.num_free_slots}",
    )


def ecd1_allocation_charges(label: str, before: int, after: int, allocation: Allocation) -> None:
    _charges_its_own("ECD-1", label, before, after, allocation, "")


def _charges_its_own(
    clause: str, label: str, before: int, after: int, allocation: Allocation, context: str
) -> None:
    check(
        before - after == allocation.num_embeds,
        clause,
        f"allocating {label}{context} took num_free_slots from {before} to {after}; it must "
        f"charge its own {allocation.num_embeds} embeddings",
    )


# --- ECD-2: releases are idempotent, and what is listed ---------------------------------------


def ecd2_release(label: str, before: int, after: int, released: Allocation | None) -> None:
    """A release gives back exactly what the allocation charged; a release of an item
    holding no allocation changes nothing."""
    if released is None:
        check(
            after == before,
            "ECD-2",
            f"{label} holds no allocation (released already, never allocated, or forgotten "
            f"by a reset), yet releasing it took num_free_slots from {before} to {after}",
        )
        return
    check(
        after - before == released.num_embeds,
        "ECD-2",
        f"releasing {label} took num_free_slots from {before} to {after}; it must give "
        f"back exactly the {released.num_embeds} embeddings its allocation charged",
    )


def ecd2_free(rid: str, before: int, after: int, released: Sequence[Allocation]) -> None:
    given_back = sum(a.num_embeds for a in released)
    what = (
        f"its allocations charged {given_back}"
        if released
        else "it holds no allocation, so nothing may change"
    )
    check(
        after - before == given_back,
        "ECD-2",
        f"free({rid}) took num_free_slots from {before} to {after}; {what}",
    )


def ecd2_listing(
    impl: EncoderDecoderCacheManager, model: EncoderDecoderCacheModel, req: RequestView, when: str
) -> None:
    """``get_cached_input_ids`` lists every item holding an allocation, and only items of
    the request (the others listed are released to no effect)."""
    ecd2_listed(model, req, set(impl.get_cached_input_ids(req)), when)


def ecd2_every_listing(
    impl: EncoderDecoderCacheManager,
    model: EncoderDecoderCacheModel,
    requests: Sequence[RequestView],
    when: str,
) -> None:
    """:func:`ecd2_listing` of each request in turn: the same calls and checks as a loop
    of it (one exchange when the manager is isolated: :func:`properties.framework.answers`)."""
    listings = answers(impl.get_cached_input_ids, ((req,) for req in requests))
    for req in requests:
        ecd2_listed(model, req, set(next(listings)), when)


def ecd2_listed(
    model: EncoderDecoderCacheModel, req: RequestView, got: set[int], when: str
) -> None:
    """ECD-2 on ``got``, what ``get_cached_input_ids(req)`` listed."""
    want = model.cached_input_ids(req.request_id)
    items = set(range(len(req.items)))
    check(
        want <= got <= items,
        "ECD-2",
        f"{when}: get_cached_input_ids({req.request_id}) = {sorted(got)}; it must list the "
        f"items holding an allocation, {sorted(want)}, and only items of the request, "
        f"{sorted(items)}",
    )


# --- ECD-3: nothing is shared -----------------------------------------------------------------


def ecd3_check_misses(
    label: str, got: bool, before: tuple[Any, ...], after: tuple[Any, ...]
) -> None:
    check(
        not got,  # the scheduler reads it as a condition
        "ECD-3",
        f"{label}: check_and_update_cache returned {got!r}; an encoder output never outlives "
        "its step, so there is never a hit",
    )
    check(
        after == before,
        "ECD-3",
        f"{label}: check_and_update_cache changed the manager: (num_free_slots, listings) "
        f"{before} -> {after}",
    )


def ecd3_allocation_is_own(label: str, before: int, after: int, allocation: Allocation) -> None:
    """The same check as ECD-1's, for an allocation whose hash another live allocation
    carries: a charge shared between the two is ECD-3's violation."""
    context = f", while another allocation of {allocation.mm_hash} is live,"
    _charges_its_own("ECD-3", label, before, after, allocation, context)


# --- ECD-4: can_allocate is exact --------------------------------------------------------------


def ecd4_verdict(label: str, budget: int, planned: int, free: int, got: bool, ok: bool) -> None:
    check(
        got == ok,
        "ECD-4",
        f"{label}: can_allocate(budget={budget}, planned={planned}) returned {got}; with "
        f"{free} free slots it must return {ok}",
    )


def ecd4_changes_nothing(label: str, before: tuple[Any, ...], after: tuple[Any, ...]) -> None:
    check(
        after == before,
        "ECD-4",
        f"{label}: can_allocate changed the manager: (num_free_slots, listings) "
        f"{before} -> {after}",
    )


# --- ECD-5: freed hashes one step after allocation --------------------------------------------


def ecd5_drain(got: Sequence[str], required: Sequence[str]) -> None:
    missing = sorted(set(required) - set(got))
    check(
        not missing,
        "ECD-5",
        f"get_freed_mm_hashes returned {list(got)}; it must list every hash allocated in the "
        f"step before, {sorted(set(required))}: {missing} would never be dropped by the "
        "worker, or only after its slots were given out again",
    )


# --- ECD-6: reset -----------------------------------------------------------------------------


def ecd6_reset_releases(impl: EncoderDecoderCacheManager, model: EncoderDecoderCacheModel) -> None:
    free = impl.num_free_slots
    check(
        free == model.cache_size,
        "ECD-6",
        f"after reset() num_free_slots is {free}; every allocation is released, so all "
        f"{model.cache_size} slots are free",
    )

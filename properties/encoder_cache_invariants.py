"""The checks of ``EncoderCacheMachine``, one group per clause (ECM-1..9), each
readable as its clause in SPEC.md: the implementation's observable state against the
model's (:mod:`properties.models.encoder_cache`) after a step or an operation.

The machine (:mod:`properties.encoder_cache_machine`) decides when each runs; the
order in which it calls them is the order a failure is reported in, so that a run
breaking two clauses reports the same one every time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from properties.framework import answers, check, is_set_aside
from properties.models.encoder_cache import EncoderCacheModel, Reference
from spec.components import EncoderCacheBookkeeping, EncoderCacheManager
from spec.types import MultiModalItem, RequestView


def snapshot(impl: EncoderCacheManager) -> tuple[Any, ...]:
    """Everything observable about the implementation, as plain values."""
    return (
        cached_of(impl),
        list(impl.freeable.items()),
        impl.num_free_slots,
        impl.num_freeable_slots,
    )


def cached_of(impl: EncoderCacheManager) -> dict[str, set[str]]:
    cached: Mapping[str, Any] = impl.cached
    return {mm_hash: set(ids) for mm_hash, ids in cached.items()}


# --- ECM-1: slot accounting -------------------------------------------------------------


def ecm1_slots(model: EncoderCacheModel, free: int, freeable_slots: int) -> None:
    """Free slots (``free``, the implementation's) are capacity minus held embeddings;
    freeable slots add the freeable entries."""
    cap = model.cache_size
    check(
        free == model.num_free_slots and 0 <= free <= cap,
        "ECM-1",
        f"num_free_slots is {free}; capacity {cap} minus held embeddings "
        f"{dict(model.sizes)} is {model.num_free_slots}",
    )
    check(
        freeable_slots == model.num_freeable_slots and 0 <= freeable_slots <= cap,
        "ECM-1",
        f"num_freeable_slots is {freeable_slots}; free {model.num_free_slots} "
        f"plus freeable {dict(model.freeable)} is {model.num_freeable_slots}",
    )


# --- ECM-2: freeable entries in release order --------------------------------------------


def ecm2_freeable_order(cache: EncoderCacheManager, model: EncoderCacheModel) -> None:
    freeable = list(cache.freeable.items())
    check(
        freeable == list(model.freeable.items()),
        "ECM-2",
        f"freeable (oldest release first) is {freeable}; the unreferenced entries "
        f"in release order are {list(model.freeable.items())}",
    )


def ecm2_released_is_newest(
    cache: EncoderCacheManager, model: EncoderCacheModel, label: str, h: str
) -> None:
    freeable = list(cache.freeable.items())
    check(
        bool(freeable) and freeable[-1] == (h, model.sizes[h]),
        "ECM-2",
        f"{label} released the last reference to {h}: it must be the newest "
        f"freeable entry with size {model.sizes[h]}; freeable={freeable}",
    )


def ecm2_free_appends(
    rid: str, old_order: list[str], impl_order: list[str], newly: Sequence[str]
) -> None:
    check(
        impl_order[: len(old_order)] == old_order
        and sorted(impl_order[len(old_order) :]) == sorted(newly),
        "ECM-2",
        f"request {rid} finished: freeable must be {old_order} followed by "
        f"{sorted(newly)} in some order; got {impl_order}",
    )


# --- ECM-3: hits, allocations and what is listed -----------------------------------------


def ecm3_check_answer(label: str, item: MultiModalItem, got: bool, ref: Reference | None) -> None:
    check(
        got == (ref is not None),
        "ECM-3",
        f"{label}: check_and_update_cache returned {got}, but {item.mm_hash} is "
        f"{'held' if ref is not None else 'not held'}",
    )


# Each checker reads a property of the cache once, for its condition and its message: a
# read is a round trip to an isolated implementation.


def ecm3_hit_references(cache: EncoderCacheManager, req: RequestView, item: MultiModalItem) -> None:
    cached, freeable = cached_of(cache), list(cache.freeable)
    check(
        req.request_id in cached.get(item.mm_hash, set()) and item.mm_hash not in freeable,
        "ECM-3",
        f"after a hit, {req.request_id} must reference {item.mm_hash} and it "
        f"must leave freeable; cached={cached}, freeable={freeable}",
    )


def ecm3_allocated_references(
    cache: EncoderCacheManager, req: RequestView, input_id: int, item: MultiModalItem
) -> None:
    cached = cached_of(cache)
    check(
        req.request_id in cached.get(item.mm_hash, set())
        and input_id in cache.get_cached_input_ids(req),
        "ECM-3",
        f"after allocate, {req.request_id} must reference {item.mm_hash} through "
        f"item {input_id}; cached={cached}",
    )


def ecm3_cached(cache: EncoderCacheManager, model: EncoderCacheModel) -> None:
    cached = cached_of(cache)
    check(
        cached == model.cached(),
        "ECM-3",
        f"cached is {cached}; the model holds {model.cached()}",
    )


def listed_input_ids(cache: EncoderCacheManager, req: RequestView) -> set[int]:
    """What ``get_cached_input_ids`` lists for ``req``: read once, judged by every
    checker of it (ECM-3's listing, ECM-6's coverage)."""
    return set(cache.get_cached_input_ids(req))


def each_listing(
    cache: EncoderCacheManager, requests: Sequence[RequestView]
) -> Iterator[tuple[RequestView, set[int]]]:
    """Each request with :func:`listed_input_ids` of it, in turn: the same calls as a
    loop of :func:`listed_input_ids` (one exchange when the cache manager is isolated:
    :func:`properties.framework.answers`)."""
    listings = answers(cache.get_cached_input_ids, ((req,) for req in requests))
    for req in requests:
        yield req, set(next(listings))


def ecm3_listing(model: EncoderCacheModel, req: RequestView, got: set[int], when: str) -> None:
    """``get_cached_input_ids`` (``got``: :func:`listed_input_ids`) lists every item
    holding a reference and nothing whose hash is not held (other items of held hashes
    may be listed)."""
    want = model.cached_input_ids(req.request_id)
    allowed = {i for i, item in enumerate(req.items) if item.mm_hash in model.sizes}
    check(
        want <= got <= allowed,
        "ECM-3",
        f"{when}: get_cached_input_ids({req.request_id}) = {sorted(got)}; it must "
        f"list the items holding a reference, {sorted(want)}, and may list only items "
        f"whose hash is held, {sorted(allowed)}",
    )


# --- ECM-4: can_allocate's verdict ---------------------------------------------------------


def ecm4_verdict(
    label: str, budget: int, planned: int, got: bool, ok: bool, freeable_slots_before: int
) -> None:
    check(
        got == ok,
        "ECM-4",
        f"{label}: can_allocate(budget={budget}, planned={planned}) returned {got}; "
        f"with {freeable_slots_before} freeable slots it must return {ok}",
    )


def ecm4_refusal_changes_nothing(
    cache: EncoderCacheManager, label: str, before: tuple[Any, ...]
) -> None:
    after = snapshot(cache)
    check(
        after == before,
        "ECM-4",
        f"{label}: can_allocate returned False but changed the cache: {before} -> {after}",
    )


def ecm4_grant_leaves_room(cache: EncoderCacheManager, label: str, n: int, planned: int) -> None:
    free = cache.num_free_slots
    check(
        n + planned <= free,
        "ECM-4",
        f"{label}: can_allocate returned True, but only {free} "
        f"slots are free for {n} + {planned} planned embeddings",
    )


# --- ECM-5: eviction order and extent -------------------------------------------------------


def ecm5_evicts_exactly(
    label: str, evicted_impl: set[str], freeable_before: list[str], evicted: Sequence[str]
) -> None:
    referenced = sorted(evicted_impl - set(freeable_before))
    check(
        not referenced,
        "ECM-5",
        f"{label}: can_allocate evicted {referenced}, which a request still references",
    )
    check(
        evicted_impl == set(evicted),
        "ECM-5",
        f"{label}: can_allocate evicted {sorted(evicted_impl)}; with freeable "
        f"(oldest first) {freeable_before} it must evict exactly {evicted}",
    )


# --- ECM-6: references per request ----------------------------------------------------------


def ecm6_request_keeps_reference(
    cache: EncoderCacheManager, label: str, rid: str, h: str
) -> None:
    cached, freeable = cached_of(cache), list(cache.freeable)
    check(
        rid in cached.get(h, set()) and h not in freeable,
        "ECM-6",
        f"{label} is released while {rid} still has another item with {h}: "
        f"{rid} must keep referencing {h}; cached={cached}, freeable={freeable}",
    )


def ecm6_freed_references_nothing(cache: EncoderCacheManager, rid: str) -> None:
    still = sorted(h for h, ids in cached_of(cache).items() if rid in ids)
    check(not still, "ECM-6", f"request {rid} was freed but still references {still}")


def ecm6_items_covered(model: EncoderCacheModel, req: RequestView, got: set[int]) -> None:
    """Every item carrying a hash the request references is listed (``got``:
    :func:`listed_input_ids`)."""
    want = model.cached_input_ids(req.request_id)
    # An item left out although another item with its hash is listed: the
    # reference does not cover every item carrying the hash (ECM-6).
    listed = {req.items[i].mm_hash for i in got if i < len(req.items)}
    uncovered = sorted(i for i in want - got if req.items[i].mm_hash in listed)
    check(
        not uncovered,
        "ECM-6",
        f"{req.request_id} references "
        f"{sorted({req.items[i].mm_hash for i in uncovered})}, but its items "
        f"{uncovered} carrying it are not covered: get_cached_input_ids = "
        f"{sorted(got)}, expected {sorted(want)}",
    )


# --- ECM-7: the freed hashes the worker is told to drop -------------------------------------


def ecm7_drain(got: list[str], want: Sequence[str], optional: set[str], held: set[str]) -> None:
    """``want``: evicted since the last drain and not held now; ``optional``: evicted or
    held before a reset; ``held``: what the model holds now."""
    # A repeat is harmless (every consumer drops with pop(h, None)): ECM-7 judges
    # the set of hashes reported, not how often each is listed.
    held_now = sorted(set(got) & held)
    check(
        not held_now,
        "ECM-7",
        f"get_freed_mm_hashes reported {held_now}, which is held again",
    )
    reset_note = (
        f" (and it may list {sorted(optional)}, evicted or held before a reset)"
        if optional
        else ""
    )
    check(
        set(want) <= set(got) <= set(want) | optional,
        "ECM-7",
        f"get_freed_mm_hashes returned {sorted(got)}; the hashes evicted since the "
        f"last drain and not held now are {sorted(set(want))}{reset_note}",
    )


# --- ECM-8: bookkeeping only for what is held and referenced --------------------------------


def ecm8_bookkeeping(cache: EncoderCacheManager, model: EncoderCacheModel) -> None:
    """State is kept only for held entries and referencing requests."""
    if is_set_aside("ECM-8"):
        # A leak changes none of the observable state the model follows: once
        # found, the other clauses are judged on every run, not only on the
        # runs that never release anything.
        return
    # State is needed for what the model holds or the implementation shows it
    # holds: a divergence another clause reports (ECM-3, ECM-6) is not counted
    # again here; only state that neither needs is a leak.
    impl = cast(EncoderCacheBookkeeping, cache)
    cached = cached_of(cache)
    held = set(cached) | set(model.sizes)
    hashes = set(impl.tracked_mm_hashes())
    check(
        hashes == held,
        "ECM-8",
        f"the manager keeps state for hashes {sorted(hashes)}; it holds "
        f"{sorted(held)} (an evicted entry leaves nothing behind)",
    )
    referencing = {rid for ids in cached.values() for rid in ids} | set(model.uses)
    requests = set(impl.tracked_request_ids())
    check(
        requests == referencing,
        "ECM-8",
        f"the manager keeps state for requests {sorted(requests)}; the requests "
        f"referencing an entry are {sorted(referencing)} (a request that references "
        "nothing leaves nothing behind)",
    )


# --- ECM-9: reset forgets everything ---------------------------------------------------------


def ecm9_reset_forgets(
    cache: EncoderCacheManager, model: EncoderCacheModel, requests: Sequence[RequestView]
) -> None:
    cap = model.cache_size
    state = snapshot(cache)
    check(
        state == ({}, [], cap, cap),
        "ECM-9",
        f"after reset() nothing may be held, freeable or referenced and all {cap} "
        f"slots free: (cached, freeable, free, freeable slots) is {state}",
    )
    for req in requests:
        left = sorted(cache.get_cached_input_ids(req))
        check(
            not left,
            "ECM-9",
            f"after reset() get_cached_input_ids({req.request_id}) is {left}; the "
            "references are gone",
        )

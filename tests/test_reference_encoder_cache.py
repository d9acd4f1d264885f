"""Unit tests of the reference encoder cache manager (ECM-1..9, HASH-6)."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from reference.encoder_cache import EncoderCacheManager
from spec.errors import EmbedCountMismatchError, InvalidInputError
from spec.types import MultiModalItem, PlaceholderRange, RequestView


def req(request_id: str, *items: tuple[str, int]) -> RequestView:
    """A request whose items ``(mm_hash, num_embeds)`` sit one after another, one text
    token apart."""
    built, offset = [], 1
    for mm_hash, size in items:
        built.append(MultiModalItem(mm_hash, PlaceholderRange(offset, size)))
        offset += size + 1
    return RequestView(request_id, tuple(built))


def admit(cache: EncoderCacheManager, request: RequestView, input_id: int) -> None:
    """What the scheduler does for an item the hook scheduled."""
    assert cache.can_allocate(request, input_id, 10**9, 0)
    cache.allocate(request, input_id)


def state(cache: EncoderCacheManager) -> tuple[object, ...]:
    return (
        dict(cache.cached),
        list(cache.freeable.items()),
        cache.num_free_slots,
        cache.num_freeable_slots,
    )


def test_initial_state() -> None:
    cache = EncoderCacheManager(10)
    assert (cache.cache_size, cache.num_free_slots, cache.num_freeable_slots) == (10, 10, 10)
    assert dict(cache.cached) == {} and dict(cache.freeable) == {}
    assert cache.get_freed_mm_hashes() == []


def test_allocate_references_and_accounts_in_embeddings() -> None:
    cache = EncoderCacheManager(10)
    r1 = req("r1", ("A", 4))
    assert not cache.check_and_update_cache(r1, 0)
    admit(cache, r1, 0)
    assert dict(cache.cached) == {"A": frozenset({"r1"})}
    assert (cache.num_free_slots, cache.num_freeable_slots) == (6, 6)
    assert cache.get_cached_input_ids(r1) == {0}


def test_units_are_embeddings_not_tokens() -> None:
    cache = EncoderCacheManager(10)
    # 5 positions, of which 3 take embeddings (row-break style).
    item = MultiModalItem("A", PlaceholderRange(0, 5, (True, True, False, True, False)))
    request = RequestView("r1", (item,))
    admit(cache, request, 0)
    assert cache.num_free_slots == 7


def test_hit_from_another_request_shares_the_entry() -> None:
    cache = EncoderCacheManager(10)
    r1, r2 = req("r1", ("A", 4)), req("r2", ("A", 4))
    admit(cache, r1, 0)
    assert cache.check_and_update_cache(r2, 0)
    assert dict(cache.cached) == {"A": frozenset({"r1", "r2"})}
    assert cache.num_free_slots == 6  # held once
    cache.free(r1)
    assert dict(cache.freeable) == {}  # r2 still references it
    cache.free(r2)
    assert dict(cache.freeable) == {"A": 4}
    assert (cache.num_free_slots, cache.num_freeable_slots) == (6, 10)
    assert dict(cache.cached) == {"A": frozenset()}


def test_hit_on_a_freeable_entry_takes_it_out_of_freeable() -> None:
    cache = EncoderCacheManager(10)
    admit(cache, req("r1", ("A", 4)), 0)
    cache.free(req("r1", ("A", 4)))
    r2 = req("r2", ("A", 4))
    assert cache.check_and_update_cache(r2, 0)
    assert dict(cache.freeable) == {}
    assert cache.num_freeable_slots == 6
    assert cache.get_cached_input_ids(r2) == {0}


def test_freeable_is_ordered_by_release_and_eviction_takes_the_oldest_only() -> None:
    cache = EncoderCacheManager(9)
    r1, r2, r3 = req("r1", ("A", 3)), req("r2", ("B", 3)), req("r3", ("C", 3))
    for request in (r1, r2, r3):
        admit(cache, request, 0)
    for request in (r2, r1, r3):  # release order: B, A, C
        cache.free(request)
    assert list(cache.freeable) == ["B", "A", "C"]
    r4 = req("r4", ("D", 5))
    assert cache.can_allocate(r4, 0, 5, 0)
    # 5 slots needed: evicting B (3) is not enough, B and A (6) is; C stays.
    assert list(cache.freeable) == ["C"]
    assert set(cache.cached) == {"C"}
    assert cache.num_free_slots == 6
    cache.allocate(r4, 0)
    assert cache.get_freed_mm_hashes() == ["B", "A"]
    assert cache.get_freed_mm_hashes() == []


def test_planned_embeddings_count_toward_space() -> None:
    cache = EncoderCacheManager(6)
    admit(cache, req("r1", ("A", 4)), 0)
    cache.free(req("r1", ("A", 4)))
    r2 = req("r2", ("B", 2), ("C", 2))
    assert cache.can_allocate(r2, 0, 10, 0)  # 2 free already: nothing evicted
    assert list(cache.freeable) == ["A"]
    assert cache.can_allocate(r2, 1, 10, 2)  # 2 + 2 > 2 free: A goes
    assert list(cache.freeable) == [] and cache.num_free_slots == 6
    cache.allocate(r2, 0)
    cache.allocate(r2, 1)
    assert cache.get_freed_mm_hashes() == ["A"]


def test_can_allocate_false_on_budget_or_space_and_changes_nothing() -> None:
    cache = EncoderCacheManager(8)
    admit(cache, req("r1", ("A", 4)), 0)  # referenced: not reclaimable
    admit(cache, req("r2", ("B", 2)), 0)
    cache.free(req("r2", ("B", 2)))  # freeable: reclaimable
    before = state(cache)
    r3 = req("r3", ("C", 4))
    assert not cache.can_allocate(r3, 0, 3, 0)  # budget 3 < 4 (space would do)
    assert not cache.can_allocate(r3, 0, 4, 1)  # 4 + 1 > 4 freeable slots
    assert state(cache) == before
    assert cache.can_allocate(r3, 0, 4, 0)  # exactly the budget and exactly the space
    assert cache.num_free_slots == 4
    assert cache.get_freed_mm_hashes() == ["B"]


def test_same_image_twice_in_one_request_is_held_until_its_last_use() -> None:
    """ECM-6: a request references a hash until every item that took a reference for
    it is released."""
    cache = EncoderCacheManager(4)
    r1 = req("r1", ("A", 4), ("B", 1), ("A", 4))
    admit(cache, r1, 0)
    assert cache.get_cached_input_ids(r1) == {0}  # only the item that took a reference
    assert cache.check_and_update_cache(r1, 2)  # the second occurrence: a hit
    assert cache.get_cached_input_ids(r1) == {0, 2}
    cache.free_encoder_input(r1, 0)
    assert cache.get_cached_input_ids(r1) == {2}
    assert dict(cache.cached) == {"A": frozenset({"r1"})}
    assert dict(cache.freeable) == {}
    assert not cache.can_allocate(req("r2", ("C", 4)), 0, 4, 0)  # A must not be evicted
    cache.free_encoder_input(r1, 2)
    assert cache.get_cached_input_ids(r1) == set()
    assert dict(cache.freeable) == {"A": 4}


def test_free_releases_every_item_in_input_id_order() -> None:
    cache = EncoderCacheManager(10)
    r1 = req("r1", ("B", 2), ("A", 2), ("B", 2))
    admit(cache, r1, 1)
    admit(cache, r1, 0)
    assert cache.check_and_update_cache(r1, 2)  # B's second occurrence takes a reference
    cache.free(r1)
    # As if items 0, 1, 2 were released in turn: B is freed with its last item, 2.
    assert list(cache.freeable) == ["A", "B"]
    assert cache.get_cached_input_ids(r1) == set()
    cache.free(r1)  # nothing left: a no-op
    assert list(cache.freeable) == ["A", "B"]


def test_releasing_an_unreferenced_item_does_nothing() -> None:
    cache = EncoderCacheManager(10)
    r1 = req("r1", ("A", 2), ("B", 2))
    admit(cache, r1, 0)
    cache.free_encoder_input(r1, 1)
    cache.free_encoder_input(req("other", ("A", 2)), 0)
    assert dict(cache.cached) == {"A": frozenset({"r1"})}
    assert cache.get_cached_input_ids(r1) == {0}


def test_freed_hashes_leave_out_those_held_again() -> None:
    cache = EncoderCacheManager(2)
    a1, b, a2 = req("r1", ("A", 2)), req("r2", ("B", 2)), req("r3", ("A", 2))
    admit(cache, a1, 0)
    cache.free(a1)
    admit(cache, b, 0)  # evicts A
    cache.free(b)
    admit(cache, a2, 0)  # evicts B, A is held again
    assert cache.get_freed_mm_hashes() == ["B"]
    cache.free(a2)
    admit(cache, b, 0)  # evicts A again
    assert cache.get_freed_mm_hashes() == ["A"]


def test_a_hash_evicted_twice_before_a_drain_is_reported_once() -> None:
    cache = EncoderCacheManager(2)
    a, b = req("r1", ("A", 2)), req("r2", ("B", 2))
    for _ in range(2):
        admit(cache, a, 0)
        cache.free(a)
        admit(cache, b, 0)
        cache.free(b)
    admit(cache, req("r3", ("C", 2)), 0)
    assert cache.get_freed_mm_hashes() == ["A", "B"]


def test_count_mismatch_is_rejected_and_changes_nothing() -> None:
    cache = EncoderCacheManager(10)
    admit(cache, req("r1", ("A", 4)), 0)
    cache.free(req("r1", ("A", 4)))
    before = state(cache)
    with pytest.raises(EmbedCountMismatchError, match="A"):
        cache.check_and_update_cache(req("r2", ("A", 5)), 0)
    # Only the presented item is judged: item 1 of r3 disagrees, item 0 does not.
    with pytest.raises(EmbedCountMismatchError, match="item 1"):
        cache.check_and_update_cache(req("r3", ("A", 4), ("A", 3)), 1)
    assert state(cache) == before
    assert cache.get_cached_input_ids(req("r2", ("A", 5))) == set()


def test_a_request_that_disagrees_with_itself_is_refused_where_it_disagrees() -> None:
    # Item 0 agrees with itself and is allocated; item 1, reached later, is refused
    # (the scheduling hook rejects the step there, SCH-11).
    cache = EncoderCacheManager(10)
    request = req("r1", ("A", 4), ("A", 3))
    cache.allocate(request, 0)
    with pytest.raises(EmbedCountMismatchError, match="item 1"):
        cache.check_and_update_cache(request, 1)
    assert dict(cache.cached) == {"A": frozenset({"r1"})}


def test_allocate_of_a_held_hash_is_refused() -> None:
    cache = EncoderCacheManager(10)
    admit(cache, req("r1", ("A", 2)), 0)
    with pytest.raises(InvalidInputError, match="already held"):
        cache.allocate(req("r2", ("A", 2)), 0)


def test_allocate_without_space_is_refused() -> None:
    cache = EncoderCacheManager(3)
    admit(cache, req("r1", ("A", 2)), 0)
    cache.free(req("r1", ("A", 2)))
    with pytest.raises(InvalidInputError, match="can_allocate"):
        cache.allocate(req("r2", ("B", 2)), 0)  # 1 free: can_allocate would evict A first
    assert set(cache.cached) == {"A"}


def test_a_view_that_disagrees_with_the_recorded_reference_is_refused() -> None:
    cache = EncoderCacheManager(10)
    admit(cache, req("r1", ("A", 2)), 0)
    with pytest.raises(InvalidInputError, match="different request view"):
        cache.free_encoder_input(req("r1", ("B", 2)), 0)


def test_observable_state_is_a_copy() -> None:
    cache = EncoderCacheManager(10)
    admit(cache, req("r1", ("A", 2)), 0)
    cached = cache.cached
    with pytest.raises(TypeError):
        cached["B"] = frozenset()  # type: ignore[index]
    ids = cache.get_cached_input_ids(req("r1", ("A", 2)))
    ids.add(7)
    freeable = cache.freeable
    assert isinstance(freeable, OrderedDict)
    freeable["X"] = 1  # a copy: the manager does not see it
    assert cache.get_cached_input_ids(req("r1", ("A", 2))) == {0}
    assert dict(cache.freeable) == {} and set(cache.cached) == {"A"}


def test_zero_capacity_refuses_everything() -> None:
    cache = EncoderCacheManager(0)
    assert not cache.can_allocate(req("r1", ("A", 1)), 0, 10, 0)


@pytest.mark.parametrize(("size", "match"), [(-1, ">= 0"), (2.5, "int"), (True, "int")])
def test_bad_cache_size(size: object, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        EncoderCacheManager(size)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "call",
    [
        lambda c, r: c.check_and_update_cache(r, 1),
        lambda c, r: c.check_and_update_cache(r, -1),
        lambda c, r: c.check_and_update_cache(r, True),
        lambda c, r: c.can_allocate(r, 3, 1, 0),
        lambda c, r: c.allocate(r, 1),
        lambda c, r: c.free_encoder_input(r, 1),
        lambda c, r: c.can_allocate(r, 0, -1, 0),
        lambda c, r: c.can_allocate(r, 0, 1, -1),
        lambda c, r: c.can_allocate(r, 0, 1.0, 0),
        lambda c, r: c.check_and_update_cache("r1", 0),
        lambda c, r: c.free("r1"),
        lambda c, r: c.get_cached_input_ids(None),
    ],
)
def test_bad_arguments_are_invalid_input(call: object) -> None:
    cache = EncoderCacheManager(4)
    with pytest.raises(InvalidInputError):
        call(cache, req("r1", ("A", 1)))  # type: ignore[operator]

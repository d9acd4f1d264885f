"""Unit tests of the reference front-end item cache (reference/item_cache.py, SPEC.md FIC)."""

from __future__ import annotations

import pytest

from reference.item_cache import ItemCache
from spec import components
from spec.errors import InvalidInputError, ItemCacheMissError


def test_meets_the_protocol() -> None:
    assert isinstance(ItemCache(4), components.ItemCache)


def test_held_items_are_left_out_and_resolved() -> None:
    cache = ItemCache(4)
    assert cache.send([("a", b"xx")]) == [b"xx"]
    assert cache.receive([("a", b"xx")]) == [b"xx"]
    assert cache.send([("a", b"xx")]) == [None]
    assert cache.receive([("a", None)]) == [b"xx"]


def test_a_payload_sent_replaces_the_held_one() -> None:
    """FIC-1: a resent payload never loses to a stale entry."""
    cache = ItemCache(4)
    cache.receive([("a", b"old")])
    assert cache.receive([("a", b"new")]) == [b"new"]
    assert cache.receive([("a", None)]) == [b"new"]


def test_items_that_do_not_fit_together_are_sent_with_their_data() -> None:
    """FIC-1: the request whose items outweigh the cache (vLLM V18) is served, twice."""
    cache = ItemCache(2)
    for _ in range(3):
        sent = cache.send([("a", b"x"), ("b", b"yy")])
        assert cache.receive(list(zip(["a", "b"], sent, strict=True))) == [b"x", b"yy"]


def test_a_drift_misses_once_and_the_resend_is_served() -> None:
    """FIC-2, FIC-3: a request dropped after the sender; the miss; invalidate; resend."""
    cache = ItemCache(4)
    assert cache.send([("a", b"xx")]) == [b"xx"]  # dropped before the engine
    sent = cache.send([("a", b"xx")])
    assert sent == [None]
    with pytest.raises(ItemCacheMissError):
        cache.receive([("a", None)])
    cache.invalidate("a")
    assert cache.receive([("a", cache.send([("a", b"xx")])[0])]) == [b"xx"]


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(InvalidInputError):
        ItemCache(-1)
    with pytest.raises(InvalidInputError):
        ItemCache(4).send([("", b"x")])
    with pytest.raises(InvalidInputError):
        ItemCache(4).receive([("a", "text")])  # type: ignore[list-item]

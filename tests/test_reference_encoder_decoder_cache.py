"""Unit tests of the reference encoder-decoder cache manager (ECD-1..6), and of how an
adapter without one is reported (ECD "not provided", never "pass")."""

from __future__ import annotations

import pytest

from harness.runner import Verdict, verify
from reference.encoder_decoder_cache import EncoderDecoderCacheManager
from spec.errors import InvalidInputError
from spec.types import MultiModalItem, PlaceholderRange, RequestView


def req(request_id: str, *items: tuple[str, int]) -> RequestView:
    """A request whose inputs ``(mm_hash, num_embeds)`` sit one after another."""
    built, offset = [], 1
    for mm_hash, size in items:
        built.append(MultiModalItem(mm_hash, PlaceholderRange(offset, size)))
        offset += size + 1
    return RequestView(request_id, tuple(built))


def admit(cache: EncoderDecoderCacheManager, request: RequestView) -> None:
    """What the scheduler does at a waiting request's first step."""
    planned = 0
    for input_id, item in enumerate(request.items):
        assert cache.can_allocate(request, input_id, 10**9, planned)
        planned += item.num_embeds
    for input_id in range(len(request.items)):
        cache.allocate(request, input_id)


def test_the_whisper_decode_loop_gives_the_slots_back_once() -> None:
    """ECD-1, ECD-2: the scheduler releases every listed input after every step and frees
    the request when it finishes; the slots come back once (vLLM's credit each time: V20)."""
    cache = EncoderDecoderCacheManager(8)
    whisper = req("r1", ("audio", 4))
    admit(cache, whisper)
    assert cache.num_free_slots == 4
    for _step in range(5):
        for input_id in sorted(cache.get_cached_input_ids(whisper)):
            cache.free_encoder_input(whisper, input_id)
        cache.free_encoder_input(whisper, 0)  # an input listed by another implementation
        assert cache.num_free_slots == 8
    cache.free(whisper)
    cache.free(req("r2", ("audio", 4)))  # got no KV blocks: it allocated nothing
    assert cache.num_free_slots == 8


def test_slots_are_embeddings_and_each_allocation_is_its_own() -> None:
    """ECD-1, ECD-3: break positions cost nothing; the same input in two requests is
    charged twice, and never a hit."""
    cache = EncoderDecoderCacheManager(10)
    mask = (True, True, False, True)
    item = MultiModalItem("A", PlaceholderRange(0, 4, mask))
    r1, r2 = RequestView("r1", (item,)), RequestView("r2", (item,))
    admit(cache, r1)
    assert not cache.check_and_update_cache(r2, 0)
    admit(cache, r2)
    assert cache.num_free_slots == 4
    cache.free(r1)
    assert cache.num_free_slots == 7 and cache.get_cached_input_ids(r2) == {0}


def test_can_allocate_is_exact_and_changes_nothing() -> None:
    """ECD-4: an exact fit is granted, one embedding more is not, and neither changes
    the free slots."""
    cache = EncoderDecoderCacheManager(6)
    admit(cache, req("r1", ("A", 2)))
    r2 = req("r2", ("B", 3))
    assert cache.can_allocate(r2, 0, 3, 1)
    assert not cache.can_allocate(r2, 0, 3, 2)
    assert not cache.can_allocate(r2, 0, 2, 0)
    assert cache.num_free_slots == 4


def test_freed_hashes_come_one_step_after_the_allocation() -> None:
    """ECD-5: the drain ending step k+1 lists what step k allocated, released or not."""
    cache = EncoderDecoderCacheManager(8)
    r1, r2 = req("r1", ("A", 2)), req("r2", ("B", 2))
    admit(cache, r1)
    assert cache.get_freed_mm_hashes() == []  # the end of step 1: A is not stored yet
    cache.free(r1)
    admit(cache, r2)
    assert cache.get_freed_mm_hashes() == ["A"]  # the end of step 2
    assert cache.get_freed_mm_hashes() == ["B"]  # the end of step 3
    assert cache.get_freed_mm_hashes() == []


def test_reset_releases_everything() -> None:
    """ECD-6: every slot free, and releasing what was allocated before changes nothing."""
    cache = EncoderDecoderCacheManager(8)
    r1 = req("r1", ("A", 3))
    admit(cache, r1)
    cache.get_freed_mm_hashes()
    cache.reset()
    assert cache.num_free_slots == 8 and cache.get_cached_input_ids(r1) == set()
    cache.free(r1)
    assert cache.num_free_slots == 8


def test_allocate_refuses_what_the_protocol_forbids() -> None:
    cache = EncoderDecoderCacheManager(4)
    r1 = req("r1", ("A", 3))
    cache.allocate(r1, 0)
    with pytest.raises(InvalidInputError, match="allocated already"):
        cache.allocate(r1, 0)
    with pytest.raises(InvalidInputError, match="can_allocate must succeed first"):
        cache.allocate(req("r2", ("B", 2)), 0)
    with pytest.raises(InvalidInputError):
        cache.free_encoder_input(r1, 1)


def test_an_adapter_without_the_component_reports_ecd_not_provided() -> None:
    """The reference stands in for no subject: a zoo entry providing only the encoder
    cache manager gets ECD rows "not provided", never "pass"."""
    report = verify("adapters.zoo.ecm_counts_entries", "ci", ["EncoderDecoderCacheMachine"])
    verdicts = {row.clause: row.verdict for row in report.rows}
    assert verdicts == {f"ECD-{k}": Verdict.NOT_PROVIDED for k in range(1, 7)}

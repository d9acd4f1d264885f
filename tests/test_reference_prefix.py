"""Unit tests of the reference block hasher (reference/prefix.py, SPEC.md PFX)."""

from __future__ import annotations

from typing import Any

import pytest

import properties.prefix  # noqa: F401 - registers the PFX properties
from reference.prefix import ROOT_PARENT, BlockHasher, hash_block_tokens
from spec import components
from spec.errors import InvalidInputError, InvalidRangeError
from spec.types import LoraAdapter, MultiModalItem, PlaceholderRange, PrefixIdentity

P = 32001  # placeholder id

#: The settings the brief fixes for these runs. The explain phase is left out of zoo
#: runs: it only annotates the (already shrunk) counterexample and costs seconds.


def item(mm_hash: str, offset: int, length: int) -> MultiModalItem:
    return MultiModalItem(mm_hash, PlaceholderRange(offset, length))


# --- plain examples ----------------------------------------------------------------------


def test_meets_the_protocol() -> None:
    assert isinstance(BlockHasher(2), components.BlockHasher)
    assert BlockHasher(3).block_size == 3


def test_only_full_blocks_are_hashed() -> None:
    hasher = BlockHasher(2)
    assert hasher.request_block_hashes([], []) == []
    assert hasher.request_block_hashes([7], []) == []
    assert len(hasher.request_block_hashes([1, 2, 3, 4, 5], [])) == 2
    assert len(BlockHasher(1).request_block_hashes([1, 2, 3], [])) == 3


def test_hashes_chain_from_the_root() -> None:
    tokens = [1, 2, 3, 4]
    first, second = BlockHasher(2).request_block_hashes(tokens, [])
    assert first == hash_block_tokens(ROOT_PARENT, [1, 2], ())
    assert second == hash_block_tokens(first, [3, 4], ())
    assert len(first) == 64 and first != second


def test_serialization_is_framed() -> None:
    # Token and key boundaries are part of the hash: no concatenation ambiguity.
    assert hash_block_tokens("", [1, 23], ()) != hash_block_tokens("", [12, 3], ())
    assert hash_block_tokens("", [1], (("a1", 0),)) != hash_block_tokens("", [1], (("a", 10),))
    assert hash_block_tokens("", [1], (("a", 0), ("b", 1))) != hash_block_tokens(
        "", [1], (("a0b", 1),)
    )
    assert hash_block_tokens("x", [1], ()) != hash_block_tokens("", [1], ())


def test_extra_keys_of_every_overlapping_item_with_relative_offsets() -> None:
    hasher = BlockHasher(4)
    a, b = item("a", 1, 2), item("b", 3, 6)  # a: [1, 3), b: [3, 9)
    assert hasher.block_extra_keys([a, b], 0, 4) == (("a", 1), ("b", 3))
    assert hasher.block_extra_keys([a, b], 4, 8) == (("b", -1),)
    assert hasher.block_extra_keys([a, b], 8, 12) == (("b", -5),)
    assert hasher.block_extra_keys([a, b], 9, 12) == ()
    assert hasher.block_extra_keys([a, b], 3, 3) == ()  # an empty window overlaps nothing


def test_same_tokens_different_image_diverge_at_the_image() -> None:
    hasher = BlockHasher(2)
    tokens = [5, 6, 7, P, P, P, 8, 9]
    cat = hasher.request_block_hashes(tokens, [item("cat", 3, 3)])
    dog = hasher.request_block_hashes(tokens, [item("dog", 3, 3)])
    assert cat[0] == dog[0]  # block [0, 2) is text before the image
    assert all(x != y for x, y in zip(cat[1:], dog[1:], strict=True))
    again = hasher.request_block_hashes(list(tokens), [item("cat", 3, 3)])
    assert again == cat


def test_moving_an_image_among_placeholders_changes_its_blocks() -> None:
    hasher = BlockHasher(4)
    tokens = [P] * 8
    here = hasher.request_block_hashes(tokens, [item("img", 1, 2)])
    there = hasher.request_block_hashes(tokens, [item("img", 2, 2)])
    assert here[0] != there[0] and here[1] != there[1]


def test_text_only_prompts_share_every_block() -> None:
    assert BlockHasher(2).request_block_hashes([1, 2, 3, 4], []) == BlockHasher(
        2
    ).request_block_hashes((1, 2, 3, 4), ())


@pytest.mark.parametrize("block_size", [0, -1, True, 2.0, "2"])
def test_bad_block_size_is_rejected(block_size: Any) -> None:
    with pytest.raises(InvalidInputError, match="block_size"):
        BlockHasher(block_size)


def test_bad_input_is_a_clear_error() -> None:
    hasher = BlockHasher(2)
    with pytest.raises(InvalidInputError, match=r"token_ids\[1\]"):
        hasher.request_block_hashes([1, -2], [])
    with pytest.raises(InvalidInputError, match=r"token_ids\[0\]"):
        hasher.request_block_hashes(["1"], [])  # type: ignore[list-item]
    with pytest.raises(InvalidRangeError, match="past the end"):
        hasher.request_block_hashes([P, P, P], [item("img", 1, 3)])
    with pytest.raises(InvalidInputError, match="mm_hash"):
        hasher.request_block_hashes([P, P], [item("", 0, 2)])
    with pytest.raises(InvalidInputError, match="MultiModalItem"):
        hasher.block_extra_keys([("img", 0)], 0, 2)  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="end_token_idx"):
        hasher.block_extra_keys([], 4, 2)
    with pytest.raises(InvalidInputError, match="start_token_idx"):
        hasher.block_extra_keys([], -1, 2)


def test_empty_identity_is_the_plain_hash() -> None:
    hasher = BlockHasher(2)
    items = [MultiModalItem("a", PlaceholderRange(1, 2))]
    plain = hasher.request_block_hashes([0, 9, 9, 1], items)
    assert hasher.request_block_hashes_with([0, 9, 9, 1], items, PrefixIdentity()) == plain


def test_each_kind_is_tagged() -> None:
    """PFX-8: the same string as an adapter name, a path, a salt or an image identifier
    keys block 0 four different ways; an empty salt is no salt (PFX-7)."""
    hasher = BlockHasher(1)
    tokens = [7]
    firsts = {
        hasher.request_block_hashes_with(tokens, [], PrefixIdentity(lora=LoraAdapter("x", "/p")))[
            0
        ],
        hasher.request_block_hashes_with(tokens, [], PrefixIdentity(lora=LoraAdapter("L", "x")))[0],
        hasher.request_block_hashes_with(tokens, [], PrefixIdentity(cache_salt="x"))[0],
        hasher.request_block_hashes_with(
            tokens, [MultiModalItem("x", PlaceholderRange(0, 1))], PrefixIdentity()
        )[0],
    }
    assert len(firsts) == 4
    assert hasher.request_block_hashes_with(
        tokens, [], PrefixIdentity(cache_salt="")
    ) == hasher.request_block_hashes(tokens, [])


def test_embeddings_key_every_block_by_all_its_rows() -> None:
    hasher = BlockHasher(2)
    rows = ((0.0,), (0.0,), (0.0,), (0.0,))
    changed = ((0.0,), (0.0,), (0.0,), (1.0,))
    a = hasher.request_block_hashes_with([0] * 4, [], PrefixIdentity(prompt_embeds=rows))
    b = hasher.request_block_hashes_with([0] * 4, [], PrefixIdentity(prompt_embeds=changed))
    assert a[0] == b[0] and a[1] != b[1]


def test_bad_identities_are_clear_errors() -> None:
    with pytest.raises(InvalidInputError, match="rows"):
        BlockHasher(1).request_block_hashes_with(
            [0, 0], [], PrefixIdentity(prompt_embeds=((0.0,),))
        )
    with pytest.raises(InvalidInputError, match="non-empty"):
        LoraAdapter("name", "")
    with pytest.raises(InvalidInputError, match="one width"):
        PrefixIdentity(prompt_embeds=((0.0,), (0.0, 1.0)))

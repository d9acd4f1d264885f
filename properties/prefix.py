"""Properties of prefix-cache block hashing with multimodal extra keys (SPEC.md PFX-1..6).

The block hasher arrives through :class:`~properties.framework.Parts`; nothing here
knows how it hashes. The properties only compare hashes for equality, so they hold for
any collision-resistant hash: they state *which* prompts must share blocks and which
must not, in terms of tokens, items and their placement.

Strategies aim where block hashing breaks: placeholders at position 0, starting and
ending on block boundaries, adjacent to each other (two items in one block), spanning
several blocks, the same image twice in one prompt, images in the partial tail block,
block sizes 1..4, and prompts made entirely of identical dummy tokens (the case where
only the extra keys can tell two images apart).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from hypothesis import assume, given, note
from hypothesis import strategies as st

from properties.framework import (
    Parts,
    Runnable,
    answers,
    check,
    clause_property,
    probed_product,
    stateless,
)
from spec.components import BlockExtraKeys, BlockHasher
from spec.types import MultiModalItem, PlaceholderRange

#: The placeholder id every image position carries (and, in dummy prompts, every
#: position): two images can only be told apart by their extra keys.
PLACEHOLDER_ID = 32001

#: Content hashes: short hex strings, so that the same image recurs within and across
#: prompts.
MM_HASHES = st.text(alphabet="0123456789abcdef", min_size=1, max_size=3)


@dataclass(frozen=True)
class Layout:
    """A prompt for the block hasher: block size, token ids, items sorted and disjoint."""

    block_size: int
    token_ids: tuple[int, ...]
    items: tuple[MultiModalItem, ...]

    @property
    def num_blocks(self) -> int:
        """Full blocks, the only ones that have hashes."""
        return len(self.token_ids) // self.block_size

    def first_block(self, item: MultiModalItem) -> int:
        """The first block the item overlaps."""
        return item.mm_position.offset // self.block_size

    def describe(self) -> str:
        parts = [f"block_size={self.block_size}, {len(self.token_ids)} tokens"]
        for item in self.items:
            pos = item.mm_position
            last_block = (pos.end - 1) // self.block_size
            parts.append(
                f"image {item.mm_hash} at [{pos.offset}, {pos.end}) "
                f"(blocks {self.first_block(item)}..{last_block})"
            )
        return "; ".join(parts)


def _copied(items: Sequence[MultiModalItem]) -> list[MultiModalItem]:
    """Equal items in new objects (new strings, new ranges): identity must not matter."""
    return [
        MultiModalItem(
            mm_hash="".join(list(item.mm_hash)),
            mm_position=replace(item.mm_position),
        )
        for item in items
    ]


@st.composite
def _masks(draw: st.DrawFn, length: int) -> tuple[bool, ...] | None:
    """No mask, or an ``is_embed`` mask with at least one embedding position (block
    hashing must not depend on it)."""
    if not draw(st.booleans()):
        return None
    mask = draw(st.lists(st.booleans(), min_size=length, max_size=length))
    mask[draw(st.integers(0, length - 1))] = True
    return tuple(mask)


@st.composite
def layouts(
    draw: st.DrawFn,
    *,
    block_size: int | None = None,
    min_items: int = 0,
    max_items: int = 4,
    dummy_tokens: bool = False,
    min_tail: int = 0,
    mm_hashes: st.SearchStrategy[str] = MM_HASHES,
) -> Layout:
    """Prompts whose items sit at position 0, on block boundaries, adjacent to each
    other or anywhere, with lengths that end on a boundary or span several blocks.
    Text tokens come from a tiny vocabulary (so token ids alone often coincide); with
    ``dummy_tokens`` every position is the placeholder id."""
    bs = block_size if block_size is not None else draw(st.integers(1, 4))
    text = st.just(PLACEHOLDER_ID) if dummy_tokens else st.integers(0, 3)
    tokens: list[int] = []
    items: list[MultiModalItem] = []
    for _ in range(draw(st.integers(min_items, max_items))):
        placement = draw(st.sampled_from(["adjacent", "boundary", "anywhere"]))
        if placement == "adjacent":
            gap = 0
        elif placement == "boundary":
            gap = -len(tokens) % bs + bs * draw(st.integers(0, 1))
        else:
            gap = draw(st.integers(0, 2 * bs))
        tokens.extend(draw(st.lists(text, min_size=gap, max_size=gap)))
        offset = len(tokens)
        if draw(st.booleans()):  # end on a block boundary, possibly several blocks on
            length = bs - offset % bs + bs * draw(st.integers(0, 2))
        else:
            length = draw(st.integers(1, 3 * bs))
        mm_position = PlaceholderRange(offset, length, draw(_masks(length)))
        items.append(MultiModalItem(draw(mm_hashes), mm_position))
        tokens.extend([PLACEHOLDER_ID] * length)
    tail = draw(st.integers(min_tail, 2 * bs))
    tokens.extend(draw(st.lists(text, min_size=tail, max_size=tail)))
    return Layout(bs, tuple(tokens), tuple(items))


def _hashes_other_than(old: str) -> st.SearchStrategy[str]:
    return MM_HASHES.filter(lambda h: h != old)


def _first_difference(a: Sequence[str], b: Sequence[str]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"block {i} differs"
    return f"lengths {len(a)} and {len(b)}"


@clause_property("pfx_chain_prefix_property", "PFX-1", subject=("block_hasher",))
def pfx_chain_prefix_property(parts: Parts) -> Runnable:
    """PFX-1: one hash per full block, and cutting a prompt between items (dropping
    the items after the cut) keeps exactly the hashes of the blocks before the cut."""

    @given(layout=layouts(), data=st.data())
    def test(layout: Layout, data: st.DataObject) -> None:
        note(layout.describe())
        hasher = parts.block_hasher(layout.block_size)
        hashes = list(hasher.request_block_hashes(layout.token_ids, layout.items))
        check(
            len(hashes) == layout.num_blocks,
            "PFX-1",
            f"a {len(layout.token_ids)}-token prompt has {layout.num_blocks} full blocks "
            f"of {layout.block_size}, but {len(hashes)} hashes",
        )
        cuts = [
            c
            for c in range(len(layout.token_ids) + 1)
            if not any(i.mm_position.offset < c < i.mm_position.end for i in layout.items)
        ]
        cut = data.draw(st.sampled_from(cuts), label="cut")
        kept = [i for i in layout.items if i.mm_position.end <= cut]
        prefix = list(hasher.request_block_hashes(layout.token_ids[:cut], kept))
        note(f"the prompt cut after {cut} tokens keeps {len(kept)} images")
        check(
            prefix == hashes[: cut // layout.block_size],
            "PFX-1",
            f"the first {cut} tokens hash differently alone than as the start of the longer "
            f"prompt ({_first_difference(prefix, hashes)}): a prompt's block hashes depend "
            f"on what follows it",
        )

    return stateless(test)


@clause_property("pfx_same_inputs_same_hashes", "PFX-2", subject=("block_hasher",))
def pfx_same_inputs_same_hashes(parts: Parts) -> Runnable:
    """PFX-2: equal inputs in different objects hash equal, again and from a new
    instance."""

    @given(layout=layouts())
    def test(layout: Layout) -> None:
        note(layout.describe())
        hasher = parts.block_hasher(layout.block_size)
        first = list(hasher.request_block_hashes(layout.token_ids, layout.items))
        again = list(hasher.request_block_hashes(list(layout.token_ids), _copied(layout.items)))
        check(
            again == first,
            "PFX-2",
            f"the same prompt and images, in new objects, hash differently on a second call "
            f"({_first_difference(first, again)})",
        )
        other = parts.block_hasher(layout.block_size)
        fresh = list(other.request_block_hashes(list(layout.token_ids), _copied(layout.items)))
        check(
            fresh == first,
            "PFX-2",
            f"a second block hasher with the same block size hashes the same prompt and "
            f"images differently ({_first_difference(first, fresh)})",
        )

    return stateless(test)


def _extra_keys_probe(parts: Parts) -> str | None:
    """Why the adapter's block hasher lacks the optional ``block_extra_keys`` (None: it
    has it); a factory that raises, or gives no block hasher, raises here (issue 32)."""
    hasher = probed_product(parts.block_hasher(1), BlockHasher, "block_hasher")
    if callable(getattr(hasher, "block_extra_keys", None)):
        return None
    return (
        "the block hasher does not provide the optional block_extra_keys() (PFX-3): no "
        "per-block extra keys"
    )


@clause_property(
    "pfx_extra_keys_exact",
    "PFX-3",
    subject=("block_hasher",),
    capabilities=(("PFX-3", _extra_keys_probe),),
)
def pfx_extra_keys_exact(parts: Parts) -> Runnable:
    """PFX-3: every full block, and an arbitrary window, gets exactly the keys of the
    items overlapping it, with offsets relative to its start, in item order."""
    if _extra_keys_probe(parts) is not None:
        return Runnable(run=lambda settings: None)

    @given(layout=layouts(), data=st.data())
    def test(layout: Layout, data: st.DataObject) -> None:
        note(layout.describe())
        bs = layout.block_size
        hasher = cast(BlockExtraKeys, parts.block_hasher(bs))
        windows = [(b * bs, (b + 1) * bs) for b in range(layout.num_blocks)]
        start = data.draw(st.integers(0, len(layout.token_ids)), label="window start")
        end = data.draw(st.integers(start, len(layout.token_ids) + bs), label="window end")
        windows.append((start, end))
        for start, end in windows:
            want = tuple(
                (item.mm_hash, item.mm_position.offset - start)
                for item in layout.items
                if item.mm_position.offset < end and item.mm_position.end > start
            )
            got = tuple(tuple(key) for key in hasher.block_extra_keys(layout.items, start, end))
            check(
                got == want,
                "PFX-3",
                f"tokens [{start}, {end}) overlap the items {list(want)} "
                f"(mm_hash, offset - start), but the extra keys are {list(got)}",
            )

    return stateless(test)


@clause_property(
    "pfx_different_image_diverges_at_first_touching_block", "PFX-4", subject=("block_hasher",)
)
def pfx_different_image_diverges_at_first_touching_block(parts: Parts) -> Runnable:
    """PFX-4: replacing some images by others of the same size keeps the hashes
    before the first block they touch and changes every hash from it on."""

    @given(layout=layouts(min_items=1), data=st.data())
    def test(layout: Layout, data: st.DataObject) -> None:
        note(layout.describe())
        indices = range(len(layout.items))
        changed = data.draw(
            st.lists(st.sampled_from(indices), min_size=1, unique=True), label="changed"
        )
        items = list(layout.items)
        for k in changed:
            old = items[k].mm_hash
            new = data.draw(_hashes_other_than(old), label=f"new hash of image {k}")
            items[k] = replace(items[k], mm_hash=new)
            note(f"the other prompt has image {new} instead of {old} at the same place")
        hasher = parts.block_hasher(layout.block_size)
        before = list(hasher.request_block_hashes(layout.token_ids, layout.items))
        after = list(hasher.request_block_hashes(layout.token_ids, items))
        first = min(layout.first_block(layout.items[k]) for k in changed)
        for block, (x, y) in enumerate(zip(before, after, strict=False)):
            if block < first:
                check(
                    x == y,
                    "PFX-4",
                    f"block {block} lies before the first changed image (block {first}) but "
                    f"its hash changed: the prompt's common prefix misses the cache",
                )
            else:
                check(
                    x != y,
                    "PFX-4",
                    f"block {block} (first changed image at block {first}) has the same hash "
                    f"with either image: the other prompt would reuse this image's KV",
                )

    return stateless(test)


@clause_property("pfx_no_cross_image_aliasing", "PFX-5", subject=("block_hasher",))
def pfx_no_cross_image_aliasing(parts: Parts) -> Runnable:
    """PFX-5: two prompts of dummy tokens with disjoint images and independent
    placements share no hash from the first block overlapping an image on."""

    @given(data=st.data())
    def test(data: st.DataObject) -> None:
        a = data.draw(layouts(min_items=1, dummy_tokens=True), label="prompt A")
        taken = {item.mm_hash for item in a.items}
        b = data.draw(
            layouts(
                block_size=a.block_size,
                min_items=1,
                dummy_tokens=True,
                mm_hashes=MM_HASHES.filter(lambda h: h not in taken),
            ),
            label="prompt B",
        )
        note(f"prompt A: {a.describe()}")
        note(f"prompt B: {b.describe()}")
        hasher = parts.block_hasher(a.block_size)
        hashes_a = list(hasher.request_block_hashes(a.token_ids, a.items))
        hashes_b = list(hasher.request_block_hashes(b.token_ids, b.items))
        first = min(layout.first_block(item) for layout in (a, b) for item in layout.items)
        for name, mine, theirs in (("A", hashes_a, hashes_b), ("B", hashes_b, hashes_a)):
            for block in range(first, len(mine)):
                twin = theirs.index(mine[block]) if mine[block] in theirs else None
                check(
                    twin is None,
                    "PFX-5",
                    f"block {block} of prompt {name} (images start at block {first}) has "
                    f"the hash of block {twin} of the other prompt, whose images are all "
                    f"different: one user's KV serves the other's image",
                )

    return stateless(test)


#: Single-image prompts the birthday search hashes: 2**17, so that any key of at most 30
#: bits collides with probability 1 - exp(-2**34 / 2**31) > 0.999 (24 bits: certainly).
SEARCH_IMAGES = 1 << 17


def search_image(n: int) -> str:
    """The ``mm_hash`` of the search's n-th image (all distinct)."""
    return f"search-{n:06x}"


@clause_property("pfx_no_aliasing_by_search", "PFX-5", subject=("block_hasher",))
def pfx_no_aliasing_by_search(parts: Parts) -> Runnable:
    """PFX-5 by search, not by luck: a birthday search over SEARCH_IMAGES one-image
    prompts of identical dummy tokens for two distinct images whose first block (the
    block the image fills) has one hash. A key narrower than the item's hash (a
    truncation, a modulus) is found when a search can reach it: seconds at 30 bits."""

    @given(block_size=st.just(2))
    def test(block_size: int) -> None:
        hasher = parts.block_hasher(block_size)
        token_ids = (PLACEHOLDER_ID,) * block_size
        seen: dict[str, str] = {}
        images = [search_image(n) for n in range(SEARCH_IMAGES)]
        placed = PlaceholderRange(offset=0, length=block_size)
        calls = ((token_ids, [MultiModalItem(mm_hash, placed)]) for mm_hash in images)
        for n, hashes in enumerate(answers(hasher.request_block_hashes, calls)):
            mm_hash, key = images[n], hashes[0]
            other = seen.setdefault(key, mm_hash)
            check(
                other == mm_hash,
                "PFX-5",
                f"images {other!r} and {mm_hash!r} (each at [0, {block_size}) of the prompt "
                f"{list(token_ids)}, block_size={block_size}) share block 0's hash {key!r} "
                f"after {n + 1} images: the whole prompt is a shared prefix, and one user's "
                "KV serves the other's image",
            )

    return stateless(test)


@clause_property("pfx_moving_image_changes_hashes", "PFX-6", subject=("block_hasher",))
def pfx_moving_image_changes_hashes(parts: Parts) -> Runnable:
    """PFX-6: moving one image by one position among dummy tokens keeps the hashes
    before the first block it touches and changes every hash from it on."""

    @given(layout=layouts(min_items=1, dummy_tokens=True, min_tail=1), data=st.data())
    def test(layout: Layout, data: st.DataObject) -> None:
        note(layout.describe())
        n = len(layout.token_ids)
        ends = [0] + [i.mm_position.end for i in layout.items]
        starts = [i.mm_position.offset for i in layout.items] + [n]
        moves = [
            (k, step)
            for k, item in enumerate(layout.items)
            for step in (-1, 1)
            # the moved range stays in the prompt and clear of its neighbours
            if ends[k] <= item.mm_position.offset + step
            and item.mm_position.end + step <= starts[k + 1]
        ]
        assume(moves)
        k, step = data.draw(st.sampled_from(moves), label="move")
        item = layout.items[k]
        pos = item.mm_position
        moved = replace(item, mm_position=replace(pos, offset=pos.offset + step))
        items = list(layout.items)
        items[k] = moved
        note(f"the other prompt has image {item.mm_hash} at offset {pos.offset + step}")
        hasher = parts.block_hasher(layout.block_size)
        before = list(hasher.request_block_hashes(layout.token_ids, layout.items))
        after = list(hasher.request_block_hashes(layout.token_ids, items))
        first = min(pos.offset, pos.offset + step) // layout.block_size
        for block, (x, y) in enumerate(zip(before, after, strict=False)):
            if block < first:
                check(
                    x == y,
                    "PFX-6",
                    f"block {block} lies before the moved image (block {first}) but its "
                    f"hash changed",
                )
            else:
                check(
                    x != y,
                    "PFX-6",
                    f"block {block} (the moved image starts touching block {first}) has the "
                    f"same hash with the image at offset {pos.offset} and at "
                    f"{pos.offset + step}: KV computed for one placement serves the other",
                )

    return stateless(test)

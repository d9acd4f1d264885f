"""Properties of every kind of prefix-cache identity together (SPEC.md PFX-7, PFX-8).

A block hash folds in more than token ids and images: the LoRA adapter a request runs
with, its ``cache_salt``, its prompt embeddings (``spec.types.PrefixIdentity``). The
block hasher offers them through the optional ``request_block_hashes_with``
(``spec.components.IdentityBlockHasher``); without it both clauses are "not provided".

Both properties hash one prompt (the same token ids and placeholder ranges) for two
requests and compare block by block against :func:`first_divergence`, the block from
which the two requests' KV is not the same thing:

- PFX-7 draws each kind's values from a pool of its own (adapter names ``L…``, paths
  ``/w/…``, salts ``S…``, rows of small floats) and changes kinds jointly — a path and
  not the name, a salt added, one embedding row — so a kind left out of the key, or
  kept only in part, shares a block it must not; and equal identities in new objects
  must share every block (a key that depends on object identity never hits).
- PFX-8 moves one value from one kind to another (a salt ``"x"`` becomes the adapter
  name ``"x"``, the image identifier ``"x"``, or is split across two kinds), so a key
  that does not say which kind a value is shares a block between different requests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import cast

from hypothesis import example, given, note
from hypothesis import strategies as st

from properties.framework import (
    Parts,
    Runnable,
    check,
    clause_property,
    probed_product,
    stateless,
)
from properties.prefix import PLACEHOLDER_ID, Layout, layouts
from spec.components import (
    IDENTITY_KINDS,
    BlockHasher,
    IdentityBlockHasher,
    KindLimitedIdentityBlockHasher,
)
from spec.types import LoraAdapter, MultiModalItem, PlaceholderRange, PrefixIdentity

#: The optional capability both clauses need (``spec.components.IdentityBlockHasher``).
CAPABILITY = "request_block_hashes_with"

#: Each kind's values, disjoint across kinds (PFX-7): only a key that drops a kind, or
#: part of one, can make two of these requests share a block they must not.
LORA_NAMES = st.sampled_from(["L1", "L2"])
LORA_PATHS = st.sampled_from(["/w/a", "/w/b"])
SALTS = st.sampled_from(["S1", "S2", ""])
EMBED_VALUES = st.sampled_from([0.0, 0.5, 1.0])
EMBED_WIDTH = 2


def identity_probe(clause: str) -> Callable[[Parts], str | None]:
    """Why the adapter's block hasher lacks ``request_block_hashes_with`` (None: it has
    it); a factory that raises, or gives no block hasher, raises here (issue 32)."""

    def probe(parts: Parts) -> str | None:
        hasher = probed_product(parts.block_hasher(1), BlockHasher, "block_hasher")
        if callable(getattr(hasher, CAPABILITY, None)):
            return None
        return f"the block hasher does not provide the optional {CAPABILITY}() ({clause})"

    return probe


def describe(identity: PrefixIdentity) -> str:
    """A request's identity in the words of the report."""
    parts = []
    if identity.lora is not None:
        parts.append(f"LoRA adapter {identity.lora.name!r} (path {identity.lora.path!r})")
    if identity.cache_salt is not None:
        parts.append(f"cache_salt {identity.cache_salt!r}")
    if identity.prompt_embeds is not None:
        parts.append(f"prompt embeddings {[list(row) for row in identity.prompt_embeds]}")
    return ", ".join(parts) or "no LoRA adapter, no salt, token ids"


def _embeds_rows_differ(a: PrefixIdentity, b: PrefixIdentity) -> int | None:
    """The first position whose prompt-embedding row differs (0 when only one has
    embeddings), None when they agree."""
    if a.prompt_embeds is None and b.prompt_embeds is None:
        return None
    if a.prompt_embeds is None or b.prompt_embeds is None:
        return 0
    for position, (x, y) in enumerate(zip(a.prompt_embeds, b.prompt_embeds, strict=True)):
        if x != y:
            return position
    return None


def _item_keys(items: Sequence[MultiModalItem], start: int, end: int) -> list[tuple[str, int]]:
    return [
        (item.mm_hash, item.mm_position.offset - start)
        for item in items
        if item.mm_position.offset < end and item.mm_position.end > start
    ]


def first_divergence(
    block_size: int,
    num_blocks: int,
    a: tuple[Sequence[MultiModalItem], PrefixIdentity],
    b: tuple[Sequence[MultiModalItem], PrefixIdentity],
) -> int:
    """The first block whose KV differs between two requests over the same token ids
    (``num_blocks`` when none does): block 0 when the adapters (name and path) or the
    salts differ (an empty salt is none), else the first block where the items keyed on
    it or the prompt-embedding rows in it differ."""
    (items_a, id_a), (items_b, id_b) = a, b
    if id_a.lora != id_b.lora or id_a.salt != id_b.salt:
        return 0
    row = _embeds_rows_differ(id_a, id_b)
    first = num_blocks if row is None else min(num_blocks, row // block_size)
    for block in range(first):
        start, end = block * block_size, (block + 1) * block_size
        if _item_keys(items_a, start, end) != _item_keys(items_b, start, end):
            return block
    return first


@st.composite
def _embeddings(draw: st.DrawFn, rows: int) -> tuple[tuple[float, ...], ...]:
    row = st.tuples(*[EMBED_VALUES] * EMBED_WIDTH)
    return tuple(draw(st.lists(row, min_size=rows, max_size=rows)))


def identity_kinds(parts: Parts) -> tuple[str, ...]:
    """The kinds PFX-7 draws: those the block hasher's ``identity_kinds()`` names
    (``spec.components.KindLimitedIdentityBlockHasher``), else every kind."""
    hasher = parts.block_hasher(1)
    if not isinstance(hasher, KindLimitedIdentityBlockHasher):
        return IDENTITY_KINDS
    kinds = tuple(hasher.identity_kinds())
    unknown = [kind for kind in kinds if kind not in IDENTITY_KINDS]
    if unknown:
        raise ValueError(f"identity_kinds() names {unknown}, not kinds of {IDENTITY_KINDS}")
    return kinds


@st.composite
def identities(
    draw: st.DrawFn, prompt_length: int, kinds: Sequence[str] = IDENTITY_KINDS
) -> PrefixIdentity:
    """Each kind present or not, from its own pool (a kind not in ``kinds``: never)."""
    lora = None
    if "lora" in kinds:
        lora = draw(st.none() | st.builds(LoraAdapter, LORA_NAMES, LORA_PATHS))
    salt = draw(st.none() | SALTS) if "cache_salt" in kinds else None
    embeds = draw(_embeddings(prompt_length) | st.none()) if "prompt_embeds" in kinds else None
    return PrefixIdentity(lora=lora, cache_salt=salt, prompt_embeds=embeds)


@st.composite
def related_identity(
    draw: st.DrawFn,
    base: PrefixIdentity,
    prompt_length: int,
    kinds: Sequence[str] = IDENTITY_KINDS,
) -> PrefixIdentity:
    """Another request's identity: each kind kept (in new objects), changed in part (the
    path and not the name, one embedding row) or drawn anew — often all kept."""
    lora = base.lora
    change = draw(st.sampled_from(["keep", "keep", "name", "path", "anew"]))
    if change == "name" and lora is not None:
        old_name = lora.name
        lora = LoraAdapter(draw(LORA_NAMES.filter(lambda n: n != old_name)), lora.path)
    elif change == "path" and lora is not None:
        old_path = lora.path
        lora = LoraAdapter(lora.name, draw(LORA_PATHS.filter(lambda p: p != old_path)))
    elif change == "anew" and "lora" in kinds:
        lora = draw(st.none() | st.builds(LoraAdapter, LORA_NAMES, LORA_PATHS))
    if lora is not None:
        lora = LoraAdapter("".join(list(lora.name)), "".join(list(lora.path)))
    salt = base.cache_salt
    if "cache_salt" in kinds and not draw(st.booleans()):
        salt = draw(st.none() | SALTS)
    if salt is not None:
        salt = "".join(list(salt))
    embeds = base.prompt_embeds
    change = draw(st.sampled_from(["keep", "row", "row", "anew"]))
    if change == "row" and embeds is not None and prompt_length:
        # anywhere in the prompt, often past the first row of a block
        position = draw(st.integers(0, prompt_length - 1), label="changed row")
        old = embeds[position]
        new = draw(st.tuples(*[EMBED_VALUES] * EMBED_WIDTH).filter(lambda r: r != old))
        embeds = embeds[:position] + (new,) + embeds[position + 1 :]
    elif change == "anew" and "prompt_embeds" in kinds:
        embeds = draw(st.none() | _embeddings(prompt_length))
    if embeds is not None:
        embeds = tuple(tuple(float(v) for v in row) for row in embeds)
    return PrefixIdentity(lora=lora, cache_salt=salt, prompt_embeds=embeds)


def _copied(items: Sequence[MultiModalItem]) -> list[MultiModalItem]:
    return [MultiModalItem("".join(list(i.mm_hash)), replace(i.mm_position)) for i in items]


@dataclass(frozen=True)
class Request:
    """One side of a comparison: the prompt's items and the request's identity."""

    items: tuple[MultiModalItem, ...]
    identity: PrefixIdentity

    def describe(self) -> str:
        images = ", ".join(
            f"image {i.mm_hash!r} at [{i.mm_position.offset}, {i.mm_position.end})"
            for i in self.items
        )
        return f"{describe(self.identity)}; {images or 'no images'}"


def _compare(
    parts: Parts, clause: str, layout: Layout, a: Request, b: Request, *, must_share: bool
) -> None:
    """Hash the prompt for both requests and check every block against
    :func:`first_divergence`: equal before it (when ``must_share``), different from it on."""
    note(f"prompt: {layout.describe()}")
    note(f"request A: {a.describe()}")
    note(f"request B: {b.describe()}")
    hasher = cast(IdentityBlockHasher, parts.block_hasher(layout.block_size))
    hashes_a = list(hasher.request_block_hashes_with(layout.token_ids, a.items, a.identity))
    hashes_b = list(
        hasher.request_block_hashes_with(list(layout.token_ids), _copied(b.items), b.identity)
    )
    check(
        len(hashes_a) == len(hashes_b) == layout.num_blocks,
        clause,
        f"a {len(layout.token_ids)}-token prompt has {layout.num_blocks} full blocks of "
        f"{layout.block_size}, but the hashes are {len(hashes_a)} and {len(hashes_b)}",
    )
    first = first_divergence(
        layout.block_size, layout.num_blocks, (a.items, a.identity), (b.items, b.identity)
    )
    note(
        f"the two requests' KV is the same for blocks 0..{first - 1}"
        if first
        else "the two requests' KV differs from block 0"
    )
    for block, (x, y) in enumerate(zip(hashes_a, hashes_b, strict=True)):
        if block >= first:
            check(
                x != y,
                clause,
                f"block {block} has the same hash for request A ({a.describe()}) and "
                f"request B ({b.describe()}), whose KV differs from block {first} on: B "
                f"would be served A's KV",
            )
        elif must_share:
            check(
                x == y,
                clause,
                f"block {block} hashes differently for request A ({a.describe()}) and "
                f"request B ({b.describe()}), although every kind of identity agrees up to "
                f"block {first}: the repeated request misses the prefix cache",
            )


@st.composite
def _identity_pairs(
    draw: st.DrawFn, kinds: Sequence[str] = IDENTITY_KINDS
) -> tuple[Layout, PrefixIdentity, PrefixIdentity]:
    """A prompt with at least one full block, and two related identities for it (of
    ``kinds`` only)."""
    block_size = draw(st.integers(1, 4))
    layout = draw(layouts(block_size=block_size, min_tail=block_size), label="prompt")
    length = len(layout.token_ids)
    base = draw(identities(length, kinds), label="identity A")
    return layout, base, draw(related_identity(base, length, kinds), label="identity B")


#: A one-token prompt in blocks of one, for the pinned examples.
_ONE_TOKEN = Layout(1, (PLACEHOLDER_ID,), ())


@clause_property(
    "pfx_every_identity_kind_keys",
    "PFX-7",
    subject=("block_hasher",),
    capabilities=(("PFX-7", identity_probe("PFX-7")),),
)
def pfx_every_identity_kind_keys(parts: Parts) -> Runnable:
    """PFX-7: over the same prompt, two requests share exactly the blocks before the
    first where their adapter, salt, embeddings or items differ."""
    if identity_probe("PFX-7")(parts) is not None:
        return Runnable(run=lambda settings: None)
    kinds = identity_kinds(parts)
    left_out = [kind for kind in IDENTITY_KINDS if kind not in kinds]

    @given(case=_identity_pairs(kinds))
    # V16 (vLLM 0.22.1): an adapter name re-pointed at other weights keys as before
    @example(
        case=(
            _ONE_TOKEN,
            PrefixIdentity(lora=LoraAdapter("L1", "/w/a")),
            PrefixIdentity(lora=LoraAdapter("L1", "/w/b")),
        )
    )
    def test(case: tuple[Layout, PrefixIdentity, PrefixIdentity]) -> None:
        layout, base, other = case
        # An empty salt is no salt (SPEC.md PFX-7): sharing between "" and none is
        # neither required nor forbidden, so such a pair only checks the blocks that differ.
        agrees = base.cache_salt == other.cache_salt
        _compare(
            parts,
            "PFX-7",
            layout,
            Request(layout.items, base),
            Request(layout.items, other),
            must_share=agrees,
        )

    runnable = stateless(test)
    if left_out:
        runnable.scope = (
            f"drew {', '.join(kinds) or 'no kind of identity'} only: the block hasher's "
            f"identity_kinds() leaves out {', '.join(left_out)}, which its engine's prefix "
            "cache does not serve"
        )
    return runnable


#: One pool for every kind (PFX-8): the same strings recur as names, paths, salts and
#: image identifiers, and concatenate into each other.
SHARED = st.sampled_from(["x", "a", "b", "ab"])
KINDS = ("lora name", "lora path", "salt", "image identifier")


def _carrying(kind: str, value: str, image_at: PlaceholderRange) -> Request:
    """A request whose only identity is ``value`` in ``kind``."""
    if kind == "lora name":
        return Request((), PrefixIdentity(lora=LoraAdapter(value, "/w/a")))
    if kind == "lora path":
        return Request((), PrefixIdentity(lora=LoraAdapter("L", value)))
    if kind == "salt":
        return Request((), PrefixIdentity(cache_salt=value))
    return Request((MultiModalItem(value, image_at),), PrefixIdentity())


@st.composite
def _moved(draw: st.DrawFn, block_size: int) -> tuple[Request, Request]:
    """Two requests over the same placeholder tokens: one value moved from one kind to
    another, or split between an adapter name and a salt where the other request has
    their concatenation."""
    image_at = PlaceholderRange(0, draw(st.integers(1, 2 * block_size)), None)
    if draw(st.booleans()):
        value = draw(SHARED)
        kind_a, kind_b = draw(st.permutations(KINDS))[:2]
        return _carrying(kind_a, value, image_at), _carrying(kind_b, value, image_at)
    first, second = draw(SHARED), draw(SHARED)
    split = PrefixIdentity(lora=LoraAdapter(first, "/w/a"), cache_salt=second)
    joined = draw(
        st.sampled_from(
            [
                PrefixIdentity(lora=LoraAdapter(first + second, "/w/a")),
                PrefixIdentity(cache_salt=first + second),
                PrefixIdentity(lora=LoraAdapter(second, "/w/a"), cache_salt=first),
            ]
        ).filter(lambda joined: joined != split)
    )
    return Request((), split), Request((), joined)


@clause_property(
    "pfx_no_identity_kind_confusion",
    "PFX-8",
    subject=("block_hasher",),
    capabilities=(("PFX-8", identity_probe("PFX-8")),),
)
def pfx_no_identity_kind_confusion(parts: Parts) -> Runnable:
    """PFX-8: a value in one kind never stands for the same value in another: requests
    that carry it in different kinds share no block from where their KV differs."""
    if identity_probe("PFX-8")(parts) is not None:
        return Runnable(run=lambda settings: None)

    @given(case=st.integers(1, 4).flatmap(lambda bs: st.tuples(st.just(bs), _moved(bs))))
    # V15 (vLLM 0.22.1, #44701): a salt keys a block as the adapter of the same name
    @example(
        case=(
            1,
            (
                _carrying("lora name", "x", PlaceholderRange(0, 1)),
                _carrying("salt", "x", PlaceholderRange(0, 1)),
            ),
        )
    )
    def test(case: tuple[int, tuple[Request, Request]]) -> None:
        block_size, (a, b) = case
        length = 3 * block_size
        layout = Layout(block_size, (PLACEHOLDER_ID,) * length, ())
        _compare(parts, "PFX-8", layout, a, b, must_share=False)

    return stateless(test)

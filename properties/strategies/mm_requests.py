"""Placeholder ranges and requests (SPL, ECM, SCH): ``is_embed`` masks, ranges at offset
0 and of one position, requests whose items share content within and across requests,
budgets around an item's size, and prompt positions around the items' boundaries."""

from __future__ import annotations

import functools
import string
from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from spec.types import MultiModalItem, PlaceholderRange, RequestView


def describe_range(r: PlaceholderRange) -> str:
    mask = ""
    if r.is_embed is not None:
        mask = ", is_embed=" + "".join("1" if b else "0" for b in r.is_embed)
    return f"PlaceholderRange(offset={r.offset}, length={r.length}{mask})"


# --- is_embed masks and placeholder ranges ---------------------------------------------


@functools.cache
@st.composite
def is_embed_masks(draw: st.DrawFn, length: int) -> tuple[bool, ...] | None:
    """``None`` (every position embeds), all True, all-False-but-one (the one at the
    start, the end or anywhere), or random with at least one True."""
    kind = draw(st.sampled_from(["none", "all", "one", "random"]))
    if kind == "none":
        return None
    if kind == "all":
        return (True,) * length
    if kind == "one":
        pos = draw(st.sampled_from([0, length - 1]) | st.integers(0, length - 1))
        return tuple(i == pos for i in range(length))
    mask = draw(st.lists(st.booleans(), min_size=length, max_size=length))
    if not any(mask):
        mask[draw(st.integers(0, length - 1))] = True
    return tuple(mask)


@functools.cache
@st.composite
def placeholder_ranges(
    draw: st.DrawFn,
    min_offset: int = 0,
    max_offset: int = 16,
    max_length: int = 8,
    masks: bool = True,
) -> PlaceholderRange:
    """Ranges at offset 0 often, single-position ranges often, with or without
    ``is_embed``."""
    offset = draw(st.sampled_from([min_offset]) | st.integers(min_offset, max_offset))
    length = draw(st.sampled_from([1]) | st.integers(1, max_length))
    mask = draw(is_embed_masks(length)) if masks else None
    return PlaceholderRange(offset, length, mask)


# --- requests (ECM, SCH) -----------------------------------------------------------------


@dataclass(frozen=True)
class MMContent:
    """One piece of multimodal content: a hash with its placeholder shape. Every item
    with this hash has this length and mask (so equal hash means equal num_embeds)."""

    mm_hash: str
    length: int
    is_embed: tuple[bool, ...] | None = None

    @property
    def num_embeds(self) -> int:
        return self.length if self.is_embed is None else sum(self.is_embed)


@functools.cache
@st.composite
def mm_contents(
    draw: st.DrawFn, mm_hash: str, max_length: int = 6, masks: bool = True
) -> MMContent:
    length = draw(st.sampled_from([1]) | st.integers(1, max_length))
    mask = draw(is_embed_masks(length)) if masks else None
    return MMContent(mm_hash, length, mask)


@functools.cache
@st.composite
def content_pools(
    draw: st.DrawFn,
    min_size: int = 1,
    max_size: int = 4,
    max_length: int = 6,
    masks: bool = True,
) -> tuple[MMContent, ...]:
    """A few distinct contents named "A", "B", ... that requests draw from."""
    n = draw(st.integers(min_size, max_size))
    return tuple(
        draw(mm_contents(string.ascii_uppercase[i], max_length, masks)) for i in range(n)
    )


@st.composite
def request_views(
    draw: st.DrawFn,
    pool: Sequence[MMContent],
    request_id: str,
    min_items: int = 0,
    max_items: int = 4,
    max_gap: int = 4,
) -> RequestView:
    """A request whose items come from ``pool`` (so the same content may occur twice in
    one request), placed with text gaps of 0..max_gap tokens (0: the first item at
    offset 0, or two items adjacent)."""
    n = draw(st.integers(min_items, max_items))
    offset = 0
    items: list[MultiModalItem] = []
    for _ in range(n):
        content = draw(st.sampled_from(list(pool)))
        offset += draw(st.sampled_from([0]) | st.integers(0, max_gap))
        items.append(
            MultiModalItem(content.mm_hash, PlaceholderRange(offset, content.length,
                                                             content.is_embed))
        )
        offset += content.length
    return RequestView(request_id, tuple(items))


def prompt_length_of(request: RequestView, trailing_text: int = 0) -> int:
    """The smallest prompt that holds every item of ``request``, plus trailing text."""
    end = max((it.mm_position.end for it in request.items), default=0)
    return end + trailing_text


@st.composite
def requests_sharing_content(
    draw: st.DrawFn,
    min_requests: int = 1,
    max_requests: int = 3,
    max_items: int = 4,
    pool: Sequence[MMContent] | None = None,
) -> tuple[RequestView, ...]:
    """Several requests ("r0", "r1", ...) drawing from one content pool: content shared
    within and across requests."""
    contents = pool if pool is not None else draw(content_pools())
    n = draw(st.integers(min_requests, max_requests))
    return tuple(
        draw(request_views(contents, f"r{i}", 0, max_items)) for i in range(n)
    )


@functools.cache
def budgets_around(size: int, spread: int = 2) -> SearchStrategy[int]:
    """Budgets (or capacities) that aim at ``size``: 0, just below, exactly, just above,
    or anything up to twice it."""
    aimed = sorted({0, max(0, size - 1), size, size + 1})
    return st.sampled_from(aimed) | st.integers(0, max(1, spread * size))



@functools.cache
def positions_around_items(request: RequestView, prompt_length: int) -> SearchStrategy[int]:
    """Prompt positions (e.g. ``num_computed_tokens`` or a chunk end) aimed at the items'
    boundaries: 0, each offset and end, one before and one after, clipped to
    ``[0, prompt_length]``; or anything in between."""
    aimed = {0, prompt_length}
    for item in request.items:
        for edge in (item.mm_position.offset, item.mm_position.end):
            aimed.update({edge - 1, edge, edge + 1})
    inside = sorted(p for p in aimed if 0 <= p <= prompt_length)
    return st.sampled_from(inside) | st.integers(0, prompt_length)

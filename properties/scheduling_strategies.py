"""Strategies for the encoder-scheduling hook (SCH) and the count check (HASH-6).

A scenario is one call of the hook: a request (items sorted and disjoint, at position 0,
adjacent or apart, with ``is_embed`` masks sometimes, the same image twice), a cache
state prepared through the public cache-manager API (other requests' entries, some
released and so freeable, maybe the request's own references from earlier chunks), and
the step: ``num_computed_tokens`` at 0, at an offset, inside an image (a prefix hit or a
continuation) or at its end; ``num_new_tokens`` ending exactly at an offset, one past,
one short, or at an image's end; an encoder budget of 0, exactly an item, one below, or
ample; the drafter shift 0 or 1; ``disable_chunked_mm_input`` on or off.

Content identity is fixed per scenario: a hash always names the same range shape (so the
same ``num_embeds``); HASH-6's strategy and the ``mismatch`` focus (SCH-11: the request
presents a hash with another count than the other requests give it) are the places that
break that on purpose. A few chunks are empty (``new = 0``, SCH-1).

Over 400 lines (556) because the SCH family's scenarios, one per outcome SPEC.md's SCH
section distinguishes, each aimed at its boundary; data more than logic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from hypothesis import strategies as st

from spec.types import EncoderBudgetConfig, MultiModalItem, PlaceholderRange, RequestView

T = TypeVar("T")


def pick(draw: st.DrawFn, choices: Sequence[T]) -> T:
    """One of ``choices``, shrinking towards the first. Drawing an index from the cached
    ``integers`` strategy is much cheaper than a fresh ``sampled_from`` per draw."""
    return choices[draw(st.integers(0, len(choices) - 1))]


#: The request whose step the hook decides; other requests only shape the cache.
REQUEST_ID = "req"
HASHES = "ABCD"

#: How the encoder budget relates to the items (see :func:`budgets`).
BUDGET_KINDS = ("ample", "ample", "exact", "below", "sum", "zero", "any")
#: Where the computed prefix ends (see :func:`computed_positions`).
COMPUTED_KINDS = ("before", "before", "at", "inside", "end", "any")
#: How a chunk ends (see :func:`chunk_lengths`); EDGE_KINDS only at a later item's offset.
CHUNK_KINDS = (
    "at_offset",
    "at_offset",
    "one_past",
    "one_short",
    "inside",
    "end",
    "rest",
    "rest",
    "any",
)
EDGE_KINDS = ("at_offset", "at_offset", "one_past", "one_short")


@dataclass(frozen=True)
class ImageShape:
    """One image: its content identity and the shape of its placeholder range."""

    mm_hash: str
    length: int
    is_embed: tuple[bool, ...] | None = None

    @property
    def num_embeds(self) -> int:
        return self.length if self.is_embed is None else sum(self.is_embed)

    def at(self, offset: int) -> MultiModalItem:
        return MultiModalItem(self.mm_hash, PlaceholderRange(offset, self.length, self.is_embed))

    def describe(self) -> str:
        if self.is_embed is None:
            return f"{self.mm_hash}(len {self.length})"
        mask = "".join("1" if b else "0" for b in self.is_embed)
        return f"{self.mm_hash}(len {self.length}, is_embed {mask})"


@st.composite
def image_shapes(draw: st.DrawFn, mm_hash: str, max_length: int = 5) -> ImageShape:
    """A range of 1..max_length positions; a third of the time with an ``is_embed`` mask
    (at least one embedding position, gaps anywhere, including first and last)."""
    length = draw(st.integers(1, max_length))
    if length > 1 and draw(st.integers(0, 2)) == 2:
        bits = draw(st.integers(1, 2**length - 1))  # a nonzero bit pattern: >= 1 embedding
        return ImageShape(mm_hash, length, tuple(bool(bits >> k & 1) for k in range(length)))
    return ImageShape(mm_hash, length)


def place(request_id: str, shapes: Sequence[ImageShape], gaps: Sequence[int]) -> RequestView:
    """A request whose items are ``shapes`` in order, ``gaps[k]`` text tokens before the
    k-th (0: at position 0, or adjacent to the previous image)."""
    items: list[MultiModalItem] = []
    offset = 0
    for shape, gap in zip(shapes, gaps, strict=True):
        item = shape.at(offset + gap)
        items.append(item)
        offset = item.mm_position.end
    return RequestView(request_id, tuple(items))


@st.composite
def universes(draw: st.DrawFn, max_images: int = 4) -> tuple[ImageShape, ...]:
    """A few distinct images (hash -> shape)."""
    count = draw(st.integers(1, max_images))
    return tuple(draw(image_shapes(HASHES[k])) for k in range(count))


@st.composite
def placed_requests(
    draw: st.DrawFn,
    request_id: str,
    universe: tuple[ImageShape, ...],
    max_items: int = 4,
    repeat: bool = False,
    min_items: int = 1,
) -> RequestView:
    """1..max_items images of ``universe`` (repeats likely; with ``repeat``, one image
    surely occurs twice), 0..2 text tokens apart."""
    count = draw(st.integers(min_items, max_items))
    shapes = [pick(draw, universe) for _ in range(count)]
    if repeat or (len(shapes) < max_items and draw(st.booleans())):
        # the same image again, later in the same request (SCH-3, ECM-6)
        shapes.insert(draw(st.integers(1, len(shapes))), pick(draw, shapes))
    gaps = [pick(draw, (0, 1, 1, 2)) for _ in shapes]
    return place(request_id, shapes, gaps)


def boundary_points(request: RequestView) -> list[int]:
    """Positions where chunk edges are interesting: 0, each offset, one before and one
    after it, each end and one before it."""
    points = {0}
    for item in request.items:
        pos = item.mm_position
        points |= {pos.offset - 1, pos.offset, pos.offset + 1, pos.end - 1, pos.end}
    return sorted(points)


@st.composite
def computed_positions(
    draw: st.DrawFn,
    request: RequestView,
    prompt_len: int,
    kinds: tuple[str, ...] = COMPUTED_KINDS,
) -> int:
    """``num_computed_tokens`` in ``[0, prompt_len)``: in the text before an image (the
    doorstep case), exactly at an offset, inside an image (a prefix-cache hit or a
    continuation), at an image's end, or anywhere."""
    kind = pick(draw, kinds)
    pos = pick(draw, request.items).mm_position
    candidates = {
        "before": [p for p in range(pos.offset - 2, pos.offset) if p >= 0] or [0],
        "at": [pos.offset],
        "inside": list(range(pos.offset + 1, pos.end)) or [pos.offset],
        "end": [pos.end],
    }.get(kind)
    if candidates is None:
        return draw(st.integers(0, prompt_len - 1))
    return min(pick(draw, candidates), prompt_len - 1)


@st.composite
def chunk_lengths(
    draw: st.DrawFn,
    request: RequestView,
    computed: int,
    prompt_len: int,
    kinds: tuple[str, ...] = CHUNK_KINDS,
) -> int:
    """``num_new_tokens`` in ``[1, prompt_len - computed]``: ending exactly at a later
    item's offset (the doorstep, and where a one-token window error shows), one past or
    one short of it, strictly inside an item, at an item's end, the rest of the prompt
    (several items at once), or anywhere."""
    remaining = prompt_len - computed
    kind = pick(draw, kinds)
    # an item's end may be reached from inside it; its offset only from before it
    reachable = [
        it.mm_position
        for it in request.items
        if (it.mm_position.end if kind in ("end", "inside") else it.mm_position.offset) > computed
    ]
    if kind == "rest" or not reachable:
        return remaining
    if kind == "any":
        return draw(st.integers(1, remaining))
    pos = pick(draw, reachable)
    if kind == "inside":  # strictly inside the item (when it has room for that)
        low = max(pos.offset, computed) + 1
        return min(draw(st.integers(low, max(low, pos.end - 1))) - computed, remaining)
    edge = {
        "at_offset": pos.offset,
        "one_past": pos.offset + 1,
        "one_short": pos.offset - 1,
        "end": pos.end,
    }[kind]
    return min(max(1, edge - computed), remaining)


def describe_item(input_id: int, item: MultiModalItem) -> str:
    pos = item.mm_position
    mask = (
        ""
        if pos.is_embed is None
        else " is_embed " + "".join("1" if b else "0" for b in pos.is_embed)
    )
    return f"{input_id}:{item.mm_hash}@[{pos.offset},{pos.end}){mask} ({item.num_embeds} embeds)"


OpKind = Literal["take", "release", "finish"]
#: mostly takes: releases and finishes only matter once something is held
OP_KINDS: tuple[OpKind, ...] = ("take", "take", "take", "release", "finish")


@dataclass(frozen=True)
class CacheOp:
    """One step of preparing the cache through its public API: ``take`` (check the
    cache, on a miss admit and allocate with ample budget), ``release``
    (``free_encoder_input``) or ``finish`` (``free``)."""

    kind: OpKind
    request_id: str
    input_id: int = 0

    def describe(self) -> str:
        if self.kind == "finish":
            return f"{self.request_id} finishes"
        verb = "takes" if self.kind == "take" else "releases"
        return f"{self.request_id} {verb} item {self.input_id}"


@dataclass(frozen=True)
class HookScenario:
    """One call of the encoder-scheduling hook and the cache state it meets."""

    request: RequestView
    prompt_len: int
    cache_size: int
    others: tuple[RequestView, ...]
    prep: tuple[CacheOp, ...]
    num_computed_tokens: int
    num_new_tokens: int
    encoder_compute_budget: int
    shift: int
    disable_chunked_mm_input: bool

    def requests(self) -> dict[str, RequestView]:
        return {r.request_id: r for r in (*self.others, self.request)}

    def describe(self) -> list[str]:
        def items(req: RequestView) -> str:
            return ", ".join(describe_item(i, item) for i, item in enumerate(req.items))

        c, n, s = self.num_computed_tokens, self.num_new_tokens, self.shift
        lines = [
            f"request {self.request.request_id} (prompt of {self.prompt_len}): "
            f"{items(self.request)}"
        ]
        lines += [f"other request {r.request_id}: {items(r)}" for r in self.others]
        lines.append(
            f"encoder cache of {self.cache_size} embeddings; prepared by: "
            + ("; ".join(op.describe() for op in self.prep) or "nothing")
        )
        lines.append(
            f"step: computed {c}, proposed new {n} (window [{c}, {c + n + s}) with "
            f"shift {s}), encoder budget {self.encoder_compute_budget}, "
            f"disable_chunked_mm_input={self.disable_chunked_mm_input}"
        )
        return lines


@st.composite
def cache_ops(
    draw: st.DrawFn,
    others: tuple[RequestView, ...],
    request: RequestView,
    computed: int,
    max_ops: int = 8,
    twin: ImageShape | None = None,
) -> tuple[CacheOp, ...]:
    """Mostly takes, then releases and finishes, by other requests; the request itself
    only touches items its earlier chunks reached (offset before ``computed``) -- never
    an item of ``twin``, the shape whose count disagrees with the cache's (SCH-11)."""
    reached = [
        i
        for i, item in enumerate(request.items)
        if item.mm_position.offset < computed
        and not (twin is not None and item == twin.at(item.mm_position.offset))
    ]
    actors = [(r.request_id, list(range(len(r.items)))) for r in others]
    if reached:
        actors.append((request.request_id, reached))
    ops: list[CacheOp] = []
    if not actors:
        return ()
    for _ in range(draw(st.integers(0, max_ops))):
        request_id, input_ids = pick(draw, actors)
        kind = pick(draw, OP_KINDS)
        ops.append(CacheOp(kind, request_id, pick(draw, input_ids)))
    return tuple(ops)


@st.composite
def budgets(
    draw: st.DrawFn,
    request: RequestView,
    kinds: tuple[str, ...] = BUDGET_KINDS,
) -> int:
    """Ample (the usual case, so that later clauses are reached), exactly an item's
    ``num_embeds``, one below it, the sum of all items, 0, or anything small."""
    sizes = [item.num_embeds for item in request.items]
    kind = pick(draw, kinds)
    if kind == "ample":
        return sum(sizes) + draw(st.integers(0, 3))
    if kind in ("exact", "below"):
        size = pick(draw, sizes)
        return size if kind == "exact" else size - 1
    if kind == "sum":
        return sum(sizes)
    return 0 if kind == "zero" else draw(st.integers(0, 12))


@st.composite
def cache_sizes(
    draw: st.DrawFn,
    universe: tuple[ImageShape, ...],
    kinds: tuple[str, ...] = ("ample", "ample", "one_image", "any"),
) -> int:
    """Room for everything, exactly one image, room for some images but not all, or
    anything small (0 included)."""
    sizes = [shape.num_embeds for shape in universe]
    kind = pick(draw, kinds)
    if kind == "ample":
        return sum(sizes) + draw(st.integers(0, 3))
    if kind == "one_image":
        return pick(draw, sizes)
    if kind == "some":
        return draw(st.integers(max(sizes), max(max(sizes), sum(sizes) - 1)))
    return draw(st.integers(0, 10))


#: What a scenario aims at: ``any`` (the general mix); ``window_edge``: the chunk ends
#: exactly at, one before or one past a later item's offset (SCH-1's window bounds);
#: ``repeats``: the request carries an image twice and the chunk covers the rest of the
#: prompt (SCH-3); ``doorstep``: computed before, at or inside an item, with a tight
#: budget (SCH-5 truncations, SCH-8 prefix hits inside an image); ``partial``: the chunk
#: starts before or exactly at an item and ends inside it (SCH-6); ``several``: the chunk
#: reaches several items (SCH-4's whole-item charges add up against budget and cache);
#: ``mismatch``: the request carries a *twin*, an image with the hash of another but a
#: different count, which the other requests may hold (SCH-11).
Focus = Literal["any", "window_edge", "repeats", "doorstep", "partial", "several", "mismatch"]


@st.composite
def twins(draw: st.DrawFn, shape: ImageShape) -> ImageShape:
    """``shape``'s hash with another ``num_embeds`` (a reused multimodal UUID)."""
    count = draw(st.integers(1, 3))
    count += count >= shape.num_embeds  # never the original count
    return ImageShape(shape.mm_hash, count)


@st.composite
def requests_with_twin(
    draw: st.DrawFn, universe: tuple[ImageShape, ...], twin: ImageShape
) -> RequestView:
    """1..3 images of ``universe`` with ``twin`` among them (before, between or after
    them: the original may be reached first, or the twin)."""
    shapes = [pick(draw, universe) for _ in range(draw(st.integers(1, 3)))]
    shapes.insert(draw(st.integers(0, len(shapes))), twin)
    return place(REQUEST_ID, shapes, [pick(draw, (0, 1, 1, 2)) for _ in shapes])


@st.composite
def hook_scenarios(
    draw: st.DrawFn, disable_chunked_mm_input: bool | None = None, focus: Focus = "any"
) -> HookScenario:
    """One call of the hook; ``disable_chunked_mm_input`` fixed, or drawn when None.
    ``focus`` aims the draw at one clause's situation (see :data:`Focus`)."""
    universe = draw(universes())
    twin = draw(twins(universe[0])) if focus == "mismatch" else None
    if twin is not None:
        request = draw(requests_with_twin(universe, twin))
    else:
        request = draw(
            placed_requests(
                REQUEST_ID,
                universe,
                repeat=focus == "repeats",
                min_items=2 if focus == "several" else 1,
            )
        )
    prompt_len = request.items[-1].mm_position.end + draw(st.integers(0, 2))
    others = tuple(
        draw(placed_requests(f"o{k + 1}", universe, max_items=3))
        for k in range(draw(st.integers(0, 2)))
    )
    if focus == "several":  # room for one item, but maybe not for the next as well
        cache_size = draw(cache_sizes(universe, ("some", "some", "one_image", "ample")))
    else:
        cache_size = draw(cache_sizes(universe))
    computed_kinds = {
        "doorstep": ("before", "before", "at", "inside"),
        "partial": ("before", "at"),
        "several": ("before", "at", "inside"),
        "mismatch": ("before", "at", "any"),
    }
    computed = draw(
        computed_positions(request, prompt_len, computed_kinds.get(focus, COMPUTED_KINDS))
    )
    prep = draw(cache_ops(others, request, computed, twin=twin))
    chunk_kinds = {
        "window_edge": EDGE_KINDS,
        "repeats": ("rest", "rest", "end"),
        "partial": ("inside", "inside", "one_past", "at_offset"),
        "several": ("rest", "end", "inside", "one_past"),
        "mismatch": ("rest", "rest", "end", "any"),
    }
    new = draw(chunk_lengths(request, computed, prompt_len, chunk_kinds.get(focus, CHUNK_KINDS)))
    if focus in ("any", "window_edge") and draw(st.integers(0, 7)) == 0:
        new = 0  # an empty chunk (a clipped or Mamba-split step): nothing is touched (SCH-1)
    # tight for doorsteps; ample when several items compete for cache space instead
    budget_kinds = {
        "doorstep": ("zero", "below", "exact", "any"),
        "several": ("ample",),
        "mismatch": ("ample", "ample", "exact"),
    }
    disable = disable_chunked_mm_input
    if disable is None:
        # With "several", mostly chunked: partly consumed items only exist then.
        disable = draw(st.integers(0, 3)) == 0 if focus == "several" else draw(st.booleans())
    return HookScenario(
        request=request,
        prompt_len=prompt_len,
        cache_size=cache_size,
        others=others,
        prep=prep,
        num_computed_tokens=computed,
        num_new_tokens=new,
        encoder_compute_budget=draw(budgets(request, budget_kinds.get(focus, BUDGET_KINDS))),
        shift=draw(st.integers(0, 1)),
        disable_chunked_mm_input=disable,
    )


# --- SCH-10: progress under a budget sized by compute_mm_encoder_budget ------------------


@dataclass(frozen=True)
class ProgressScenario:
    """A request admitted under a sized budget: other requests' entries are all
    released (freeable); the request may hold the item its computed prefix ends in."""

    request: RequestView
    prompt_len: int
    config: EncoderBudgetConfig
    max_tokens_per_item: dict[str, int]
    others: tuple[RequestView, ...]
    num_computed_tokens: int
    holds_current_item: bool


@st.composite
def progress_scenarios(draw: st.DrawFn) -> ProgressScenario:
    universe = draw(universes())
    request = draw(placed_requests(REQUEST_ID, universe))
    prompt_len = request.items[-1].mm_position.end + draw(st.integers(0, 2))
    largest = max(shape.length for shape in universe)  # tokens: covers num_embeds too
    disable = draw(st.booleans())
    # With chunking disabled a chunk must be able to cover the largest item, else
    # admission is refused (SCH-9); that case is sch_budget_sizing's, not this one's.
    max_batched = largest + draw(st.integers(0, 3)) if disable else draw(st.integers(1, 12))
    config = EncoderBudgetConfig(
        max_num_encoder_input_tokens=draw(st.integers(0, 8)),
        encoder_cache_size=draw(st.integers(0, 8)),
        max_num_batched_tokens=max_batched,
        disable_chunked_mm_input=disable,
    )
    others = tuple(
        draw(placed_requests(f"o{k + 1}", universe, max_items=3))
        for k in range(draw(st.integers(0, 2)))
    )
    return ProgressScenario(
        request=request,
        prompt_len=prompt_len,
        config=config,
        max_tokens_per_item={"image": largest},
        others=others,
        num_computed_tokens=draw(computed_positions(request, prompt_len)),
        holds_current_item=draw(st.booleans()),
    )


# --- SCH-9: budget sizing ------------------------------------------------------------------


@st.composite
def budget_configs(draw: st.DrawFn) -> tuple[EncoderBudgetConfig, dict[str, int]]:
    """A scheduler config and per-modality maximum item sizes: none at all, and the
    largest item exactly at, one above and one below ``max_num_batched_tokens``."""
    max_batched = draw(st.integers(1, 16))
    modalities = draw(st.lists(st.sampled_from(("image", "video", "audio")), unique=True))
    sizes = {m: draw(st.integers(1, 20)) for m in modalities}
    aim_at_boundary = draw(st.booleans())
    if sizes and aim_at_boundary:
        largest_modality = max(sizes, key=lambda m: sizes[m])
        sizes[largest_modality] = max(1, max_batched + draw(st.integers(-1, 1)))
    config = EncoderBudgetConfig(
        max_num_encoder_input_tokens=draw(st.integers(0, 16)),
        encoder_cache_size=draw(st.integers(0, 16)),
        max_num_batched_tokens=max_batched,
        disable_chunked_mm_input=draw(st.booleans()),
    )
    return config, sizes


# --- HASH-6: the same hash presented with another count ------------------------------------


@dataclass(frozen=True)
class MismatchScenario:
    """``holder`` holds ``A`` with one count; ``presenter`` shows ``A`` with another at
    ``input_id`` (maybe after holding another entry ``B`` itself)."""

    cache_size: int
    holder: RequestView
    holder_releases: bool
    presenter: RequestView
    presenter_holds_other: bool
    input_id: int


@st.composite
def mismatch_scenarios(draw: st.DrawFn) -> MismatchScenario:
    held = draw(image_shapes("A", max_length=4))
    other_count = draw(st.integers(1, 4))
    other_count += other_count >= held.num_embeds  # 1..5, never the held count
    breaks = draw(st.integers(0, 1))
    mask = None if breaks == 0 else (True,) * other_count + (False,) * breaks
    presented = ImageShape("A", other_count + breaks, mask)
    other = draw(image_shapes("B", max_length=3))
    holder = place("holder", [held], [0])
    with_other = draw(st.booleans())
    presenter = place(
        "presenter", [other, presented] if with_other else [presented], [1, 1][: 1 + with_other]
    )
    return MismatchScenario(
        cache_size=held.num_embeds + other.num_embeds + draw(st.integers(0, 4)),
        holder=holder,
        holder_releases=draw(st.booleans()),
        presenter=presenter,
        presenter_holds_other=with_other and draw(st.booleans()),
        input_id=1 if with_other else 0,
    )

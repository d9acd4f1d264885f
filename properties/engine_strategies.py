"""Strategies for ``EngineMachine`` (SYS): small engine configurations, image
universes sized against them, and prompts built from text runs and images.

They aim at the edges the SYS clauses turn on: budgets of exactly an item's size, a
cache that holds one or two images, images at position 0 and next to each other, the
same image twice in one prompt and across prompts, ``is_embed`` masks with break tokens
anywhere, images of equal shape with different pixels, and an image that can never fit
(it must be rejected at admission).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from hypothesis import strategies as st

from properties.models.engine import ceil_div
from spec.types import EngineConfig, EngineRequest, MultiModalItem, PlaceholderRange

#: Token ids: text tokens are small ints; image positions are placeholder tokens and the
#: positions an ``is_embed`` mask leaves out are break tokens (Pixtral-style).
TEXT_TOKENS = (0, 1, 2)
PLACEHOLDER_TOKEN = 9
BREAK_TOKEN = 8

#: At most this many unfinished requests at once (keeps programs short and readable).
MAX_LIVE = 4

#: Encoder cache sizes (embeddings), weighted towards a cache that holds one or two
#: images.
CACHE_SIZES = (2, 2, 3, 3, 4, 4, 5, 6, 7, 8)


@dataclass(frozen=True)
class Image:
    """One image of the scenario: its bytes, content hash and placeholder shape."""

    label: str
    data: bytes
    mm_hash: str
    length: int
    is_embed: tuple[bool, ...] | None

    @property
    def num_embeds(self) -> int:
        return self.length if self.is_embed is None else sum(self.is_embed)

    @property
    def shape(self) -> tuple[int, tuple[bool, ...] | None]:
        return (self.length, self.is_embed)

    def placeholder(self, offset: int) -> PlaceholderRange:
        return PlaceholderRange(offset, self.length, self.is_embed)


T = TypeVar("T")


@functools.cache
def integers(low: int, high: int) -> st.SearchStrategy[int]:
    """``st.integers(low, high)``, one object per bounds: Hypothesis validates a strategy
    and computes its properties on its first draw, so one built inside every draw costs
    that every time (the same choices and spans either way)."""
    return st.integers(low, high)


@functools.cache
def _permutations(length: int) -> st.SearchStrategy[list[int]]:
    return st.permutations(range(length))


@functools.cache
def _sampled(values: tuple[int, ...]) -> st.SearchStrategy[int]:
    return st.sampled_from(values)


_BOOLEANS = st.booleans()


def pick(data: st.DataObject, options: Sequence[T], label: str) -> T:
    """One of ``options`` (non-empty), drawn as an index: cheaper than building a
    ``sampled_from`` strategy for every draw, and it shrinks towards the first."""
    return options[data.draw(integers(0, len(options) - 1), label=label)]


#: A prompt before expansion: text runs and image labels, in order.
Segment = tuple[int, ...] | str
Prompt = tuple[Segment, ...]


@dataclass(frozen=True)
class RawImage:
    label: str
    data: bytes
    length: int
    is_embed: tuple[bool, ...] | None


@st.composite
def engine_configs(draw: st.DrawFn) -> EngineConfig:
    """Small resources, so that every limit binds: token budget 1..8, encoder budget
    1..6, encoder cache 2..8, KV cache of 4..16 blocks of 1..4 tokens."""
    block_size = draw(st.integers(1, 4), label="block_size")
    min_blocks = max(4, ceil_div(8, block_size))
    disable_chunked = draw(st.sampled_from((False, False, False, True)))
    # with chunking disabled, often exactly the first image's length (3 or 4): an image
    # as long as the token budget fits one step, and must be admitted (SYS-9)
    budgets = st.sampled_from((3, 4)) | st.integers(1, 8) if disable_chunked else st.integers(1, 8)
    return EngineConfig(
        token_budget=draw(budgets, label="token_budget"),
        encoder_compute_budget=draw(st.integers(1, 6), label="encoder_budget"),
        # mostly tight: eviction, and waiting for space, are the point
        encoder_cache_size=draw(st.sampled_from(CACHE_SIZES), label="encoder_cache_size"),
        # mostly just enough for a request or two: running requests preempt each other
        num_kv_blocks=draw(
            st.one_of(st.integers(min_blocks, min_blocks + 3), st.integers(min_blocks, 16)),
            label="num_kv_blocks",
        ),
        block_size=block_size,
        hidden_size=2,
        enable_prefix_caching=draw(st.sampled_from((True, True, True, False))),
        disable_chunked_mm_input=disable_chunked,
    )


def draw_mask(
    draw: st.DrawFn, label: str, length: int, max_embeds: int, as_many: bool = False
) -> tuple[bool, ...] | None:
    """An ``is_embed`` mask for a range of ``length`` tokens with at most ``max_embeds``
    embedding positions (as many as allowed with ``as_many``; at least one): none when
    it is not needed, one time in three otherwise; break tokens may sit anywhere, first
    position included."""
    needed = length > max_embeds
    if length < 2 or (not needed and (as_many or draw(integers(0, 2)) > 0)):
        return None
    most = min(length - 1, max_embeds)
    embeds = most if as_many else draw(integers(1, most), label=f"{label}.embeds")
    where = draw(_permutations(length), label=f"{label}.where")
    chosen = set(where[:embeds])
    return tuple(i in chosen for i in range(length))


@st.composite
def image_universes(draw: st.DrawFn, config: EngineConfig) -> tuple[RawImage, ...]:
    """3..5 images of 1..4 placeholder tokens that fit the encoder budget and cache
    (the last one, one time in three, does not: it must be rejected at admission);
    equal shapes are common (so an image can be swapped for another of the same size),
    some with break tokens (``is_embed`` false) anywhere in the range."""
    limit = min(config.encoder_compute_budget, config.encoder_cache_size)
    count = draw(integers(3, 5), label="images")
    images: list[RawImage] = []
    for k in range(count):
        label = "ABCDE"[k]
        # the first image spans several tokens, so that a prefix hit can end inside it
        lengths = (3, 4) if k == 0 else (1, 2, 2, 3, 3, 4)
        length = draw(_sampled(lengths), label=f"{label}.length")
        oversize = k == count - 1 and length > limit and draw(integers(0, 2)) == 0
        # half the time the first image takes as much of the budget (and cache) as it
        # can: little else fits beside it in one step
        as_many = k == 0 and draw(_BOOLEANS, label=f"{label}.greedy")
        mask = draw_mask(draw, label, length, length if oversize else limit, as_many)
        size = draw(_sampled((16, 16, 40)), label=f"{label}.bytes")
        images.append(RawImage(label, bytes([65 + k]) * size, length, mask))
    return tuple(images)


_engine_configs = functools.cache(lambda: engine_configs())
_image_universes = functools.cache(lambda config: image_universes(config))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[EngineConfig, tuple[RawImage, ...]]:
    config = draw(_engine_configs())
    return config, draw(_image_universes(config))


@functools.cache
def segments(labels: tuple[str, ...]) -> st.SearchStrategy[Prompt]:
    """Fresh prompts: 1..5 segments, each a run of 1..3 text tokens or an image (so
    images land at position 0, next to each other, and repeat within a prompt)."""
    text: st.SearchStrategy[Segment] = st.lists(
        st.sampled_from(TEXT_TOKENS), min_size=1, max_size=3
    ).map(tuple)
    image: st.SearchStrategy[Segment] = st.sampled_from(tuple(labels))
    # an image at position 0 half the time: it must be encoded before any token
    first = st.one_of(image, text)
    rest = st.lists(st.one_of(text, image), min_size=0, max_size=4)
    return st.builds(lambda head, tail: (head, *tail), first, rest)


#: How a new prompt relates to the earlier ones: repeats, cuts (an earlier prompt up to
#: one of its images) and swaps make prefix hits (hits that end inside an image, or that
#: must stop at a swapped image); a revisit
#: starts with an image the encoder cache holds unreferenced (a hit, or a re-encode
#: after an eviction in the same step).
PROMPT_KINDS = st.sampled_from(
    ("fresh", "fresh", "repeat", "repeat", "cut", "swap", "extend", "revisit")
)


def build_request(
    images: Mapping[str, Image], request_id: str, prompt: Prompt, max_new: int
) -> EngineRequest:
    """The expanded request: text runs as they are, each image as its placeholder
    tokens (break tokens where ``is_embed`` is false) with its range and bytes."""
    tokens: list[int] = []
    items: list[MultiModalItem] = []
    data: list[bytes] = []
    for segment in prompt:
        if isinstance(segment, str):
            image = images[segment]
            mask = image.is_embed or (True,) * image.length
            items.append(MultiModalItem(image.mm_hash, image.placeholder(len(tokens))))
            data.append(image.data)
            tokens += [PLACEHOLDER_TOKEN if flag else BREAK_TOKEN for flag in mask]
        else:
            tokens += segment
    return EngineRequest(request_id, tuple(tokens), tuple(items), tuple(data), max_new)


def describe(prompt: Prompt) -> str:
    """``A 12 B``: image labels and text runs, for narration."""
    return " ".join(s if isinstance(s, str) else "".join(map(str, s)) for s in prompt)

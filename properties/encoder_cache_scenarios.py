"""What ``EncoderCacheMachine`` drives: the scenario universe (images, capacities,
requests), the budgets of a step, and the optional capabilities that gate ECM-8 and
ECM-9 (explicit preconditions: a manager without them is not asked to have them).

Scenarios aim at the edges: a capacity of exactly one image, images of equal size, the
same image twice in one request and shared across requests, budgets of 0, exactly an
item's size and one below it, and placeholder ranges with break tokens (so that slots
counted in tokens or in entries instead of embeddings show up).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from hypothesis import strategies as st

from properties.framework import Parts, probed_product
from spec.components import EncoderCacheManager
from spec.types import MultiModalItem, PlaceholderRange, RequestView

T = TypeVar("T")

#: The optional capabilities (spec/components.py) ECM-8 and ECM-9 need.
BOOKKEEPING = ("tracked_request_ids", "tracked_mm_hashes")
RESET = ("reset",)


def provides(cache: object, methods: tuple[str, ...]) -> bool:
    return all(callable(getattr(cache, m, None)) for m in methods)


def capability_probe(methods: tuple[str, ...], clause: str) -> Callable[[Parts], str | None]:
    """Why the adapter's cache manager lacks the optional ``methods`` (None: it has them).
    A factory that raises, or gives no cache manager, raises here: an error, not an
    absence (issue 32)."""

    def probe(parts: Parts) -> str | None:
        cache = parts.encoder_cache_manager(1)
        if provides(probed_product(cache, EncoderCacheManager, "encoder_cache_manager"), methods):
            return None
        names = ", ".join(f"{m}()" for m in methods)
        return f"the encoder cache manager does not provide the optional {names} ({clause})"

    return probe


#: (num_embeds, num_breaks) of an image: sizes 1..4, several equal; mostly no breaks.
IMAGE_SHAPES = tuple((n, breaks) for breaks in (0, 0, 0, 1, 2) for n in (1, 2, 2, 3, 4))

#: How the step's remaining encoder budget relates to the item's size.
BUDGET_KINDS = ("ample", "ample", "ample", "exact", "exact", "just_below", "zero")


@dataclass(frozen=True)
class Image:
    """One image of the scenario's universe: its content identity and range shape.
    ``num_breaks`` placeholder positions take no embedding (row-break tokens)."""

    mm_hash: str
    num_embeds: int
    num_breaks: int

    def placeholder(self, offset: int) -> PlaceholderRange:
        if self.num_breaks == 0:
            return PlaceholderRange(offset, self.num_embeds)
        mask = (True,) * self.num_embeds + (False,) * self.num_breaks
        return PlaceholderRange(offset, len(mask), mask)


@dataclass(frozen=True)
class Scenario:
    cache_size: int
    images: tuple[Image, ...]
    requests: tuple[RequestView, ...]


def make_request(request_id: str, images: list[Image]) -> RequestView:
    """A request whose items are ``images`` in order, one text token between them."""
    items: list[MultiModalItem] = []
    offset = 1
    for image in images:
        position = image.placeholder(offset)
        items.append(MultiModalItem(image.mm_hash, position))
        offset = position.end + 1
    return RequestView(request_id, tuple(items))


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """A small universe of images (sizes 1..4, several equal), a capacity from exactly
    one image to a few, and requests that repeat images within and across requests."""
    num_images = draw(st.integers(3, 6))
    # One draw per image (size and breaks together) and per pick: the fewer draws, the
    # faster Hypothesis shrinks a failing run.
    shapes = [draw(st.integers(0, len(IMAGE_SHAPES) - 1)) for _ in range(num_images)]
    images = tuple(Image("ABCDEFGH"[k], *IMAGE_SHAPES[shape]) for k, shape in enumerate(shapes))
    # Exactly one image's size (a third of the time), or room for several images but not
    # for all of them at once, so that admission must evict, choosing among several
    # freeable entries: eviction is the point of the machine.
    sizes = [im.num_embeds for im in images]
    if draw(st.integers(0, 2)) == 0:
        cache_size = sizes[draw(st.integers(0, num_images - 1))]
    else:
        cache_size = draw(st.integers(max(sizes), max(max(sizes), min(12, sum(sizes) - 1))))
    requests: list[RequestView] = []
    for k in range(draw(st.integers(2, 4))):
        count = draw(st.integers(1, 4))
        picks = [images[draw(st.integers(0, num_images - 1))] for _ in range(count)]
        if k == 0 and draw(st.booleans()):
            picks.append(picks[0])  # the same image twice in one request (ECM-6)
        requests.append(make_request(f"r{k + 1}", picks))
    return Scenario(cache_size, images, tuple(requests))


def pick(data: st.DataObject, choices: Sequence[T], label: str) -> T:
    """One of ``choices`` (shrinking towards the first). Drawing an index from the cached
    ``integers`` strategy is much cheaper than building ``sampled_from`` every step."""
    return choices[data.draw(st.integers(0, len(choices) - 1), label=label)]



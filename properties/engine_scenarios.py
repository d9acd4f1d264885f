"""What ``EngineMachine``'s rules aim at, beyond the universe its scenarios draw
(:mod:`properties.engine_strategies`): the prompt a new arrival brings — fresh, or made
from what the engine has seen (a revisit of an idle cached image, a repeat, an
extension, a cut inside an image, a swap of an image for a same-shape twin), so that
prefix hits happen and some end inside an image — and the arrivals that contend for
the encoder budget and cache or for the KV blocks, or evict and re-encode an entry in
one step.

The draws happen here in the order the machine always made them (a saved
counterexample replays them); the candidate lists are plain functions of the state.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence

from hypothesis import strategies as st

from properties.engine_strategies import PROMPT_KINDS, TEXT_TOKENS, Image, Prompt, integers, pick
from spec.types import EngineConfig


def draw_prompt(
    data: st.DataObject,
    fresh: st.SearchStrategy[Prompt],
    prompts: Sequence[Prompt],
    images: Mapping[str, Image],
    idle_images: Callable[[], list[str]],
) -> Prompt:
    """A new arrival's prompt. ``prompts``: those whose prefill completed (their
    blocks went into the prefix cache); ``idle_images``: the labels of the images the
    encoder cache holds unreferenced, sorted (asked only for a revisit)."""
    if not prompts:
        return data.draw(fresh, label="prompt")
    mode = data.draw(PROMPT_KINDS, label="prompt kind")
    if mode == "fresh":
        return data.draw(fresh, label="prompt")
    if mode == "revisit":
        # an image the cache still holds but nobody uses: a hit, unless an
        # allocation in the same step evicts it first
        idle = idle_images()
        if not idle:
            return data.draw(fresh, label="prompt")
        first = pick(data, idle, "idle image")
        return (first,) + data.draw(fresh, label="prompt")
    earlier = pick(data, prompts, "earlier prompt")
    if mode == "repeat":
        return earlier
    if mode == "extend":
        keep = data.draw(integers(1, len(earlier)), label="segments kept")
        return earlier[:keep] + data.draw(fresh, label="new tail")
    if mode == "cut":
        # the earlier prompt up to one of its images: the hit (at most P - 1
        # tokens) then ends inside that image
        ends = [i + 1 for i, segment in enumerate(earlier) if isinstance(segment, str)]
        if not ends:
            return earlier
        return earlier[: pick(data, ends, "cut after image")]
    # swap: one image for another with the same placeholder shape, other pixels
    slots = [
        (i, s)
        for i, s in enumerate(earlier)
        if isinstance(s, str)
        and any(o.label != s and o.shape == images[s].shape for o in images.values())
    ]
    if not slots:
        return earlier
    index, old = pick(data, slots, "image to swap")
    twins = [
        o.label
        for o in images.values()
        if o.label != old and o.shape == images[old].shape
    ]
    new = pick(data, twins, "swapped in")
    return earlier[:index] + (new,) + earlier[index + 1 :]


def contending_pairs(config: EngineConfig, images: Mapping[str, Image]) -> list[tuple[str, str]]:
    """Pairs of images that fit the encoder budget and cache one at a time but not
    together."""
    limit = min(config.encoder_compute_budget, config.encoder_cache_size)
    fitting = [im for im in images.values() if im.num_embeds <= limit]
    return [
        (a.label, b.label)
        for a in fitting
        for b in fitting
        if a.label < b.label and a.num_embeds + b.num_embeds > limit
    ]


def reencode_triples(
    config: EngineConfig, images: Mapping[str, Image], held: Container[str]
) -> list[tuple[str, str, str]]:
    """``(A, B, X)``: A and B fit the cache together and the encoder budget one at a
    time, X fits beside A but not beside both, and X is not held (``held``: the hashes
    the cache holds)."""
    fits = min(config.encoder_compute_budget, config.encoder_cache_size)
    size = {label: im.num_embeds for label, im in images.items()}
    # everything held but A and B is older than them and goes first
    return [
        (a, b, x)
        for a in size
        for b in size
        for x in size
        if len({a, b, x}) == 3
        and size[a] + size[b] <= config.encoder_cache_size
        and max(size[a], size[b]) <= config.encoder_compute_budget
        and size[x] + size[a] <= fits
        and size[x] > config.encoder_cache_size - size[a] - size[b]
        and images[x].mm_hash not in held
    ]


def kv_hog_prompt(config: EngineConfig, images: Mapping[str, Image], head: str, k: int) -> Prompt:
    """The ``k``-th of two prompts that each fit the KV cache (with a second token) but
    not together: ``head`` (an image label, or "" for none) then text."""
    capacity = config.num_kv_blocks * config.block_size
    total = capacity // 2 + 1  # each fits (with its second token), both do not
    length = max(1, total - (images[head].length if head else 0))
    text = tuple(TEXT_TOKENS[(i + k) % len(TEXT_TOKENS)] for i in range(length))
    return (head, text) if head else (text,)

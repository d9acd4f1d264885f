"""Processor configs and prompts (EXP, SPL-5): special ids that cannot be hard-coded,
prompts with markers at position 0, side by side and at the end, and whole prompt cases
(a config, a prompt, and images aimed at the policy's boundaries)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from properties.strategies.image_data import describe_image
from properties.strategies.token_policies import images_for_policy, small_policies
from spec.types import ImageInput, ProcessorConfig, TokenCountPolicy

# --- processor configs and prompts (EXP, SPL-5) ---------------------------------------

DEFAULT_SPECIALS = (32000, 32001, 32002, 32003)


@functools.cache
@st.composite
def special_id_sets(draw: st.DrawFn) -> tuple[int, int, int, int]:
    """(marker, placeholder, break, end): the defaults, small ids (0 is a marker), or a
    shuffle, so that no implementation can hard-code them."""
    kind = draw(st.sampled_from(["default", "small", "shuffled"]))
    if kind == "default":
        return DEFAULT_SPECIALS
    pool = [0, 1, 2, 3] if kind == "small" else [5, 17, 99, 32000]
    marker, placeholder, brk, end = draw(st.permutations(pool))
    return marker, placeholder, brk, end


def config_for(policy: TokenCountPolicy, specials: tuple[int, int, int, int]) -> ProcessorConfig:
    marker, placeholder, brk, end = specials
    return ProcessorConfig(policy=policy, marker_id=marker, placeholder_id=placeholder,
                           break_id=brk, end_id=end)



@dataclass(frozen=True)
class PromptCase:
    """A prompt with one marker per image, the images, and the processor config."""

    config: ProcessorConfig
    prompt: tuple[int, ...]
    images: tuple[ImageInput, ...]

    @property
    def marker_positions(self) -> tuple[int, ...]:
        return tuple(i for i, t in enumerate(self.prompt) if t == self.config.marker_id)

    def describe(self) -> str:
        imgs = "; ".join(describe_image(i) for i in self.images) or "no images"
        return (
            f"policy {self.config.policy}, prompt {list(self.prompt)} "
            f"(markers {self.config.marker_id} at {list(self.marker_positions)}), "
            f"images: {imgs}"
        )


@functools.cache
def text_tokens(specials: tuple[int, ...]) -> SearchStrategy[int]:
    """Text token ids: small non-negative ints that avoid the special ids."""
    taken = set(specials)
    return st.integers(0, 60).map(lambda t: t if t not in taken else t + 1000)


@functools.cache
@st.composite
def prompts_with_markers(
    draw: st.DrawFn, config: ProcessorConfig, num_markers: int, max_text_run: int = 3
) -> tuple[int, ...]:
    """Text runs of 0..max_text_run tokens around ``num_markers`` markers; a run of 0
    puts a marker at position 0, two markers side by side, or a marker at the end."""
    text = text_tokens(tuple(sorted(config.special_ids())))
    prompt: list[int] = []
    for i in range(num_markers + 1):
        run = draw(st.sampled_from([0]) | st.integers(0, max_text_run))
        prompt.extend(draw(st.lists(text, min_size=run, max_size=run)))
        if i < num_markers:
            prompt.append(config.marker_id)
    return tuple(prompt)



@functools.cache
@st.composite
def prompt_cases(
    draw: st.DrawFn,
    policies: SearchStrategy[TokenCountPolicy] | None = None,
    min_images: int = 0,
    max_images: int = 3,
    max_side: int = 24,
) -> PromptCase:
    """A processor config (any policy, any special ids), a prompt with one marker per
    image, and images aimed at the policy's boundaries."""
    policy = draw(policies if policies is not None else small_policies())
    config = config_for(policy, draw(special_id_sets()))
    n = draw(st.integers(min_images, max_images))
    prompt = draw(prompts_with_markers(config, n))
    imgs = tuple(draw(images_for_policy(policy, max_side)) for _ in range(n))
    return PromptCase(config, prompt, imgs)

"""What ``EncoderDecoderCacheMachine`` drives: the scenario universe (encoder inputs,
capacities, requests) and the optional capability that gates ECD-6.

A cross-attention model's request has one encoder input, sometimes two (Whisper: one
audio; the scheduler admits at most one modality). Scenarios aim at the edges: a
capacity of exactly one input, inputs of equal size, the same input in two requests
(ECD-3: nothing may be shared), and placeholder ranges with positions that take no
embedding (so that slots counted in tokens show up). The images of the encoder cache's
universe serve as the inputs: the manager reads only their hash and size.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from properties.encoder_cache_scenarios import IMAGE_SHAPES, RESET, Image, make_request, provides
from properties.framework import Parts, probed_product
from spec.components import EncoderDecoderCacheManager
from spec.types import RequestView

__all__ = [
    "BUDGET_KINDS",
    "RESET",
    "EncDecScenario",
    "budget_for",
    "encdec_scenarios",
    "provides",
    "reset_probe",
]


def reset_probe(parts: Parts) -> str | None:
    """Why the adapter's encoder-decoder cache manager lacks ``reset()`` (None: it has it);
    a factory that raises, or gives no cache manager, raises here (issue 32)."""
    cache = probed_product(
        parts.encoder_decoder_cache_manager(1),
        EncoderDecoderCacheManager,
        "encoder_decoder_cache_manager",
    )
    if provides(cache, RESET):
        return None
    return "the encoder-decoder cache manager does not provide the optional reset() (ECD-6)"


@dataclass(frozen=True)
class EncDecScenario:
    cache_size: int
    inputs: tuple[Image, ...]
    requests: tuple[RequestView, ...]


@st.composite
def encdec_scenarios(draw: st.DrawFn) -> EncDecScenario:
    """Two or three inputs (sizes 1..4, some with positions that take no embedding), a
    capacity of one input's size or of a few, and two to four requests of one input
    (a quarter of them two), drawn from the same few inputs so that requests share them."""
    num_inputs = draw(st.integers(2, 3))
    shapes = [draw(st.integers(0, len(IMAGE_SHAPES) - 1)) for _ in range(num_inputs)]
    inputs = tuple(Image("ABCD"[k], *IMAGE_SHAPES[shape]) for k, shape in enumerate(shapes))
    sizes = [image.num_embeds for image in inputs]
    # Exactly one input's size a quarter of the time (one request at a time), else room
    # for a few, so that equal inputs of two requests are allocated side by side (ECD-3).
    if draw(st.integers(0, 3)) == 0:
        cache_size = sizes[draw(st.integers(0, num_inputs - 1))]
    else:
        cache_size = draw(st.integers(max(sizes), 2 * max(sizes) + 2))
    requests: list[RequestView] = []
    for k in range(draw(st.integers(2, 4))):
        count = 2 if draw(st.integers(0, 3)) == 0 else 1
        picks = [inputs[draw(st.integers(0, num_inputs - 1))] for _ in range(count)]
        if k > 0 and draw(st.booleans()):
            picks[0] = inputs[0]  # the same audio as another request's, often (ECD-3)
        requests.append(make_request(f"r{k + 1}", picks))
    return EncDecScenario(cache_size, inputs, tuple(requests))


#: How the step's remaining encoder budget relates to the input's size.
BUDGET_KINDS = ("ample", "ample", "ample", "exact", "exact", "just_below", "zero")


def budget_for(num_embeds: int, kind: str, cache_size: int) -> int:
    return {"zero": 0, "just_below": num_embeds - 1, "exact": num_embeds}.get(
        kind, num_embeds + cache_size
    )

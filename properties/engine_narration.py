"""The narration of ``EngineMachine``: what a counterexample says at each step, in
SPEC.md's vocabulary (the engine's configuration and images, each arrival, each step's
chunks, encodes, drops, preemptions and finishes). Kept apart from the rules and the
checks so that each reads as one thing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from properties.engine_strategies import Image, Prompt, describe
from properties.models.engine import RequestFacts
from spec.components import StepOutput
from spec.types import EngineConfig, EngineRequest

#: An image's name in the scenario ("A", "B", ...) from its content hash.
Label = Callable[[str], str]


def said_engine(config: EngineConfig) -> str:
    return (
        f"engine: token budget {config.token_budget}, encoder budget "
        f"{config.encoder_compute_budget}, encoder cache {config.encoder_cache_size}, "
        f"{config.num_kv_blocks} KV blocks of {config.block_size}, prefix caching "
        f"{'on' if config.enable_prefix_caching else 'off'}, chunked mm input "
        f"{'off' if config.disable_chunked_mm_input else 'on'}"
    )


def said_image(image: Image) -> str:
    mask = "" if image.is_embed is None else f", is_embed {image.is_embed}"
    return (
        f"image {image.label}: {len(image.data)} bytes, {image.length} tokens, "
        f"{image.num_embeds} embeddings{mask}"
    )


def said_add(
    request_id: str, prompt: Prompt, request: EngineRequest, max_new: int, problem: str | None
) -> str:
    """An arrival, and why the model says it can never run (if it cannot)."""
    return (
        f"add {request_id}: [{describe(prompt)}] ({len(request.token_ids)} tokens, "
        f"{max_new} to generate)" + (f" — inadmissible: {problem}" if problem else "")
    )


def said_aim(a: str, b: str, x: str) -> str:
    """What ``evict_and_reencode`` sets up."""
    return f"aim: use {a} then {b}, then evict {a} for {x} and bring {a} back"


def said_drain(unfinished: int, bound: int) -> str:
    return f"drain: {unfinished} unfinished, bound {bound} steps"


def said_abort(request_id: str, gone: bool) -> str:
    return f"abort {request_id} (already gone)" if gone else f"abort {request_id}"


def said_preempt(request_id: str, running: bool) -> str:
    return f"preempt {request_id} ({'running' if running else 'waiting'})"


def said_step(
    step: int, out: StepOutput, facts_of: Mapping[str, RequestFacts], label: Label
) -> str:
    """Each chunk's window and the images it encodes; what the worker drops; who is
    preempted and who finishes."""
    parts_: list[str] = []
    for chunk in out.chunks:
        start, new = chunk.num_computed_tokens, chunk.num_new_tokens
        text = f"{chunk.request_id} computes [{start}, {start + new})"
        facts = facts_of.get(chunk.request_id)
        if chunk.encoder_inputs and facts is not None:
            encoded = [
                facts.labels[i] for i in chunk.encoder_inputs if i < len(facts.labels)
            ]
            text += f" encoding {'+'.join(encoded)}"
        if chunk.num_draft_tokens:
            text += (
                f" verifying {chunk.num_draft_tokens} drafts at its end "
                f"({chunk.num_accepted_drafts} accepted)"
            )
        parts_.append(text)
    line = f"step {step}: " + ("; ".join(parts_) or "nothing scheduled")
    if out.freed_mm_hashes:
        line += f"; worker drops {', '.join(map(label, out.freed_mm_hashes))}"
    if out.preempted:
        line += f"; preempts {', '.join(out.preempted)}"
    if out.finished:
        line += f"; finishes {', '.join(out.finished)}"
    return line


def fmt_source(source: object, label: Label) -> str:
    """A KV source (SYS-6) in words: a row of an image, or a token."""
    if isinstance(source, tuple) and len(source) == 3 and source[0] == "embed":
        return f"row {source[2]} of image {label(str(source[1]))}"
    if isinstance(source, tuple) and len(source) == 2 and source[0] == "token":
        return f"token {source[1]}"
    return repr(source)

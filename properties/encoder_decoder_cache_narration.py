"""The narration of ``EncoderDecoderCacheMachine``: what a counterexample says at each
step, in SPEC.md's vocabulary (what the implementation did; the model's answer only where
it differs)."""

from __future__ import annotations

from properties.models.encoder_decoder_cache import EncoderDecoderCacheModel
from spec.types import RequestView


def item_label(req: RequestView, input_id: int) -> str:
    item = req.items[input_id]
    return f"{req.request_id} item {input_id} ({item.mm_hash}, {item.num_embeds} embeddings)"


def fmt_state(model: EncoderDecoderCacheModel) -> str:
    allocated = ", ".join(
        f"{rid} item {i} ({a.mm_hash}, {a.num_embeds})"
        for (rid, i), a in sorted(model.allocations.items())
    )
    return (
        f"allocated [{allocated}]; {model.num_free_slots} of {model.cache_size} slots free; "
        f"the next drain must list {sorted(set(model.to_report))}"
    )


def said_can_allocate(label: str, budget: int, planned: int, got: bool, ok: bool) -> str:
    said = f"{label}: can_allocate(budget={budget}, planned={planned}) -> {got}"
    return said if got == ok else said + f" (the model: {ok})"


def said_release(label: str, before: int, after: int, held: bool) -> str:
    what = "its allocation is released" if held else "it holds no allocation"
    return f"{label} is released (free_encoder_input): {what}; num_free_slots {before} -> {after}"

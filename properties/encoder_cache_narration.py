"""The narration of ``EncoderCacheMachine``: what a counterexample says at each step,
in SPEC.md's vocabulary (what the implementation did; the model's answer only where
it differs). Kept apart from the rules and the checks so that each reads as one thing.
"""

from __future__ import annotations

from collections.abc import Sequence

from properties.models.encoder_cache import EncoderCacheModel, Reference
from spec.types import RequestView


def fmt_cache(model: EncoderCacheModel) -> str:
    held = ", ".join(
        f"{h}({n})<-{{{','.join(sorted(model.referencing(h)))}}}" for h, n in model.sizes.items()
    )
    freeable = ", ".join(model.freeable)
    return (
        f"held [{held}]; freeable oldest-first [{freeable}]; "
        f"free {model.num_free_slots}, freeable slots {model.num_freeable_slots}"
    )


def item_label(req: RequestView, input_id: int) -> str:
    item = req.items[input_id]
    return f"{req.request_id} item {input_id} (image {item.mm_hash}, {item.num_embeds})"


def said_check(label: str, got: bool, ref: Reference | None) -> str:
    """check_and_update_cache's answer (a hit re-references a freeable entry)."""
    said = f"{label} checks the cache: {'hit' if got else 'miss'}"
    if ref is None:
        return said + (" (the model: miss)" if got else "")
    again = "; the freeable entry is referenced again" if ref.was_freeable else ""
    return said + (again if got else f" (the model: hit{again})")


def said_can_allocate(
    label: str,
    budget: int,
    planned: int,
    got: bool,
    gone: Sequence[str],
    ok: bool,
    evicted: Sequence[str],
) -> str:
    """can_allocate's verdict and what it evicted (``gone``), against the model's."""
    said = f"{label}: can_allocate(budget={budget}, planned={planned}) -> {got}" + (
        f", evicting {', '.join(gone)}" if gone else ""
    )
    if (got, set(gone)) != (ok, set(evicted)):
        said += f" (the model: {ok}" + (
            f", evicting {', '.join(evicted)}, oldest released first)" if evicted else ")"
        )
    return said


def said_free(rid: str, newly: Sequence[str]) -> str:
    return f"request {rid} finishes (free); " + (
        f"entries {', '.join(newly)} must become freeable" if newly else "nothing freed"
    )

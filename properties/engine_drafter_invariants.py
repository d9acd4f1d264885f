"""The checks ``EngineDrafterMachine`` adds to the engine machine's: what the drafter is
served (SYS-13) and how drafts are verified (SYS-14), readable as the clauses in
SPEC.md."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from properties.framework import check
from properties.models.engine import RequestFacts, RequestProgress
from spec.components import EngineSnapshot, ScheduledChunk


def sys13_draft_rows(
    step: int, facts: RequestFacts, start: int, new: int, served: Sequence[NDArray[Any]]
) -> list[str]:
    """For the chunk ``[start, start + new)``: the drafter is served, over
    ``[start + 1, start + new + 1)``, every item's ``is_embed`` rows there in offset
    order, bitwise; the item starting at ``start + new`` (the look-ahead's alone) may be
    left out. Returns the transitions reached."""
    end = start + new
    expected = facts.gathers_in(start + 1, end + 1)
    offsets = [facts.request.items[i].mm_position.offset for i, _ in expected]
    required = [pair for pair, offset in zip(expected, offsets, strict=True) if offset < end]
    optional = [pair for pair, offset in zip(expected, offsets, strict=True) if offset >= end]
    names = [facts.labels[i] for i, _ in expected]
    check(
        len(served) in (len(required), len(required) + len(optional)),
        "SYS-13",
        f"step {step}: the drafter reads {facts.request_id}'s [{start + 1}, {end + 1}) after "
        f"its chunk [{start}, {end}), which needs the rows of {names} "
        f"(the last may fall back to token embeddings if it starts at {end}); it was "
        f"served {len(served)} arrays",
    )
    reached: list[str] = []
    for (index, rows), got in zip(expected, served, strict=False):
        check(
            got.shape == rows.shape and bool(np.array_equal(got, rows)),
            "SYS-13",
            f"step {step}: the rows served to the drafter for {facts.request_id}'s image "
            f"{facts.labels[index]} over [{start + 1}, {end + 1}) are not that image's "
            "embedding rows",
        )
    if optional:
        fell_back = len(served) == len(required)
        reached.append("draft_fallback" if fell_back else "draft_lookahead_served")
    return reached


def sys14_draft_counts(
    step: int, k: int, facts: RequestFacts, progress: RequestProgress, chunk: ScheduledChunk
) -> tuple[int, int]:
    """A chunk verifies at most ``k`` drafts, accepts a prefix of them, keeps at least
    one position of its own, and carries drafts only right after the request's
    ``P + g`` tokens. Returns (drafts, accepted)."""
    drafts, accepted = chunk.num_draft_tokens, chunk.num_accepted_drafts
    counts = (drafts, accepted, chunk.num_new_tokens)
    check(
        all(isinstance(x, int) and not isinstance(x, bool) for x in counts)
        and 0 <= accepted <= drafts <= k
        and drafts < chunk.num_new_tokens,
        "SYS-14",
        f"step {step}: {facts.request_id}'s chunk of {chunk.num_new_tokens!r} tokens "
        f"reports {drafts!r} drafts, {accepted!r} accepted: a chunk verifies at most "
        f"k = {k} drafts after at least one position of its own, and accepts some of them",
    )
    total = facts.num_tokens(progress.outputs)
    own_end = chunk.num_computed_tokens + chunk.num_new_tokens - drafts
    check(
        drafts == 0 or own_end == total,
        "SYS-14",
        f"step {step}: {facts.request_id} verifies {drafts} drafts after "
        f"[{chunk.num_computed_tokens}, {own_end}), but it has {total} tokens "
        f"({facts.num_prompt_tokens} of prompt, {progress.outputs} generated): drafts "
        "are proposed after a sample and follow the request's tokens",
    )
    return drafts, accepted


def sys14_rejections_rolled_back(
    step: int, chunk: ScheduledChunk, after: EngineSnapshot, in_flight: int = 0
) -> None:
    """After the step, a request that verified drafts has computed its own positions and
    the accepted drafts, not the rejected ones (with async scheduling, and the
    ``in_flight`` tokens of its chunk scheduled since, which starts there)."""
    snap = after.requests.get(chunk.request_id)
    if snap is None or snap.status != "running" or not chunk.num_draft_tokens:
        return  # finished (or preempted since): nothing is left to roll back
    expected = (
        chunk.num_computed_tokens + chunk.num_new_tokens
        - chunk.num_draft_tokens + chunk.num_accepted_drafts
    )
    behind = f" behind its {in_flight} tokens in flight" if in_flight else ""
    check(
        snap.num_computed_tokens == expected + in_flight,
        "SYS-14",
        f"step {step}: {chunk.request_id} verified {chunk.num_draft_tokens} drafts in "
        f"[{chunk.num_computed_tokens}, {chunk.num_computed_tokens + chunk.num_new_tokens}) "
        f"and {chunk.num_accepted_drafts} were accepted, so {expected} positions are "
        f"computed{behind}; the engine says {snap.num_computed_tokens} "
        "(rejected drafts roll back)",
    )

"""The check ``EngineDrafterMachine`` adds to the engine machine's (SYS-13): what the
drafter is served, readable as the clause in SPEC.md."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from properties.framework import check
from properties.models.engine import RequestFacts


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

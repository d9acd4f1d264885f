"""Mutants of the one function under contract that no adapter component exposes:
``PlaceholderRange``'s embedding arithmetic lives in ``spec.types`` (the vocabulary
every implementation shares), so no zoo entry can replace it. These plausible slips
show that the ``embeds_in_range`` contract can fail.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contracts.catalog import EmbedsCase, EmbedsResult, spec_embeds


def embeds_end_inclusive(case: EmbedsCase) -> EmbedsResult:
    """Counts the embedding positions up to and including ``end`` (``[: end + 1]``)."""
    (first, _), num_embeds = spec_embeds(case)
    mask = case.is_embed()
    if mask is None:
        return (first, min(case.end + 1, case.length)), num_embeds
    return (first, sum(1 for bit in mask[: case.end + 1] if bit)), num_embeds


def embeds_ignore_mask(case: EmbedsCase) -> EmbedsResult:
    """Treats every position as an embedding, as if there were no ``is_embed``."""
    return (case.start, case.end), case.length


#: Mutant name -> (the contract it must fail, the mutant implementation).
MUTANTS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "embeds_end_inclusive": ("embeds_in_range", embeds_end_inclusive),
    "embeds_ignore_mask": ("embeds_in_range", embeds_ignore_mask),
}

"""The trusted oracle of the encoder-scheduling hook (SCH-1..8, SCH-11), written from SPEC.md.

:func:`expected_decision` walks the request's items in offset order, exactly as the
clauses read, against the cache *model* (:class:`EncoderCacheModel`, which it updates the
way the hook updates the real cache: a hit takes a reference, an admission may evict).

SPEC.md leaves one choice open: an affordable item that overlaps the window while the
window covers none of its embedding rows (only break tokens, or only the drafter's
look-ahead past an ``is_embed`` gap) may be scheduled or skipped. The oracle does not
guess: it takes the implementation's choice (``scheduled_by_impl``) for exactly those
items, and everything else is determined.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal

from properties.models.encoder_cache import EncoderCacheModel
from spec.types import MultiModalItem, RequestView

#: What happened to an item (SCH-1..6 vocabulary):
#: ``before``/``after``: outside the window; ``rolled_back``: the SCH-6 rollback stopped
#: here; ``blocked``: neither held nor affordable, the doorstep (SCH-5); ``unreached``:
#: after a stop; ``duplicate``: its hash is already scheduled in this call (SCH-3);
#: ``hit``: held, referenced for free (SCH-2); ``scheduled``: encoded whole (SCH-4);
#: ``no_rows``: affordable, but the window covers none of its rows, and not scheduled;
#: ``mismatch``: its hash is scheduled earlier in this call, or held, with another
#: ``num_embeds``: the call is rejected (SCH-11); ``idle``: the chunk is empty (``new =
#: 0``): nothing is done for any item (SCH-1).
Outcome = Literal[
    "idle",
    "mismatch",
    "before",
    "after",
    "rolled_back",
    "blocked",
    "unreached",
    "duplicate",
    "hit",
    "scheduled",
    "no_rows",
]


@dataclass
class ExpectedDecision:
    """The decision SPEC.md requires, with the reason for every item."""

    num_new_tokens: int
    encoder_compute_budget: int
    scheduled: list[int] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)
    hits: list[int] = field(default_factory=list)
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    #: ``("doorstep", i)`` (SCH-5), ``("rollback", i)`` (SCH-6), ``("mismatch", i)``
    #: (SCH-11: the call is rejected), or None: not truncated
    stop: tuple[Literal["doorstep", "rollback", "mismatch"], int] | None = None
    #: SCH-5 with a drafter shift: the doorstep that also keeps the look-ahead out of
    #: the item, ``max(0, offset - computed - s)``, for a runner that cannot fall back
    #: (v0.22.1); None where it is the same as ``num_new_tokens``.
    doorstep_before_lookahead: int | None = None


def overlaps(item: MultiModalItem, computed: int, new: int, shift: int) -> bool:
    """SCH: ``offset < computed + new + s`` and ``offset + length > computed``; with an
    empty chunk (``new = 0``) nothing overlaps, look-ahead or not (SCH-1)."""
    return (
        new > 0
        and item.mm_position.offset < computed + new + shift
        and item.mm_position.end > computed
    )


def rows_in_window(item: MultiModalItem, computed: int, window_end: int) -> int:
    """How many of the item's embedding rows lie in ``[computed, window_end)``."""
    pos = item.mm_position
    mask = pos.is_embed if pos.is_embed is not None else (True,) * pos.length
    return sum(
        1 for k, takes in enumerate(mask) if takes and computed <= pos.offset + k < window_end
    )


def lookahead_trimmed(room: int, shift: int) -> int:
    """A chunk that may run ``room`` positions before an item, trimmed so that the
    drafter's ``shift``-position look-ahead stays out of the item — unless that leaves
    nothing: then ``room`` (the look-ahead falls back to token embeddings). Cut to 0,
    the chunk would be cut to 0 again at every later step (SCH-5, SCH-6)."""
    return room - shift if room - shift > 0 else max(0, room)


def rollback_target(
    items: tuple[MultiModalItem, ...], index: int, computed: int, shift: int
) -> int:
    """SCH-6: ``t = offset - computed - s`` for the item at ``index`` where that is
    positive, else ``offset - computed`` (the look-ahead never costs the whole chunk);
    if ``computed + t`` ends strictly inside the previous item and that item starts at
    or after ``computed``, the previous item's end minus ``computed``."""
    target = lookahead_trimmed(items[index].mm_position.offset - computed, shift)
    for earlier in items[:index]:
        pos = earlier.mm_position
        if computed <= pos.offset < computed + target < pos.end:
            return pos.end - computed
    return target


def expected_decision(
    request: RequestView,
    num_computed_tokens: int,
    num_new_tokens: int,
    encoder_compute_budget: int,
    cache: EncoderCacheModel,
    shift_computed_tokens: int,
    disable_chunked_mm_input: bool,
    scheduled_by_impl: Collection[int],
) -> ExpectedDecision:
    """The decision of SCH-1..6 and SCH-11 for one call; updates ``cache`` as the hook
    must. A ``("mismatch", i)`` stop means the call must be rejected (SCH-11)."""
    computed, new, shift = num_computed_tokens, num_new_tokens, shift_computed_tokens
    out = ExpectedDecision(num_new_tokens=new, encoder_compute_budget=encoder_compute_budget)
    window_end = computed + new + shift  # the window as proposed: SCH-1's "overlaps"
    planned_sizes: dict[str, int] = {}  # mm_hash -> num_embeds of the items scheduled here
    planned = 0
    for i, item in enumerate(request.items):
        offset, end, n = item.mm_position.offset, item.mm_position.end, item.num_embeds
        h = item.mm_hash
        # The count this call or the cache already gives the hash (SCH-11).
        known = planned_sizes.get(h, cache.sizes.get(h))
        if new == 0:
            out.outcomes[i] = "idle"  # SCH-1: an empty chunk touches nothing
        elif end <= computed:
            out.outcomes[i] = "before"
        elif offset >= window_end:
            out.outcomes[i] = "after"
        elif out.stop is not None:
            out.outcomes[i] = "unreached"
        elif disable_chunked_mm_input and computed <= offset and computed + new < end:
            # SCH-6: the chunk would end inside the item: roll back before it (and
            # before the drafter's look-ahead reaches it) -- but never into the item
            # before it, which the proposed chunk covered whole.
            out.num_new_tokens = min(new, rollback_target(request.items, i, computed, shift))
            out.stop = ("rollback", i)
            out.outcomes[i] = "rolled_back"
        elif known is not None and known != n:
            out.stop = ("mismatch", i)  # SCH-11: the request's step is rejected
            out.outcomes[i] = "mismatch"
        elif h in planned_sizes:
            out.duplicates.append(i)  # SCH-3
            out.outcomes[i] = "duplicate"
        elif cache.check_and_update_cache(request, i) is not None:
            out.hits.append(i)  # SCH-2
            out.outcomes[i] = "hit"
        elif not cache.can_allocate(n, out.encoder_compute_budget, planned)[0]:
            # SCH-5: the doorstep, or nothing at all past it (a prefix hit inside).
            # (``min``: with a drafter look-ahead s > 1 the offset may lie past the end.)
            out.num_new_tokens = min(new, offset - computed) if computed < offset else 0
            before_lookahead = min(new, lookahead_trimmed(offset - computed, shift))
            if computed < offset and before_lookahead != out.num_new_tokens:
                out.doorstep_before_lookahead = before_lookahead
            out.stop = ("doorstep", i)
            out.outcomes[i] = "blocked"
        elif rows_in_window(item, computed, window_end) == 0 and i not in scheduled_by_impl:
            out.outcomes[i] = "no_rows"  # the one choice SPEC.md leaves open
        else:
            out.scheduled.append(i)  # SCH-4: whole item, budget and cache
            out.outcomes[i] = "scheduled"
            planned_sizes[h] = n
            planned += n
            out.encoder_compute_budget -= n
    return out

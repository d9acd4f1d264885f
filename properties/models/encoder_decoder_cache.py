"""The trusted model of the encoder-decoder cache manager (ECD-1..6), written from
SPEC.md alone.

It keeps the least state that states the clauses directly:

* ``allocations``: the live (unreleased) allocations, ``(request_id, input_id) ->
  Allocation`` — each its own, whatever hash it carries (ECD-3); ``num_free_slots`` is
  the cache size less the sum of their sizes (ECD-1);
* ``allocated_this_step``: the hashes allocated since the last drain;
* ``to_report``: the hashes allocated in the step before, which the next drain must
  list (ECD-5).

Deliberately plain: it must be obviously right, not fast.
"""

from __future__ import annotations

from dataclasses import dataclass

from properties.models.encoder_cache import ModelPreconditionError
from spec.types import RequestView


@dataclass(frozen=True)
class Allocation:
    """One live allocation: the hash its item carries and the embeddings it charges."""

    mm_hash: str
    num_embeds: int


class EncoderDecoderCacheModel:
    """A dict-and-lists model of ``EncoderDecoderCacheManager`` (ECD-1..6)."""

    def __init__(self, cache_size: int) -> None:
        if cache_size < 0:
            raise ModelPreconditionError(f"cache_size must be >= 0, got {cache_size}")
        self.cache_size = cache_size
        self.allocations: dict[tuple[str, int], Allocation] = {}
        self.allocated_this_step: list[str] = []
        self.to_report: list[str] = []

    # --- observable state (ECD-1, ECD-2) --------------------------------------------------

    @property
    def num_free_slots(self) -> int:
        """ECD-1: the cache size less what the live allocations charge."""
        return self.cache_size - sum(a.num_embeds for a in self.allocations.values())

    def holds(self, request_id: str, input_id: int) -> bool:
        return (request_id, input_id) in self.allocations

    def cached_input_ids(self, request_id: str) -> set[int]:
        """ECD-2: the request's items holding a live allocation (what must be listed)."""
        return {i for rid, i in self.allocations if rid == request_id}

    def live_hashes(self) -> set[str]:
        return {a.mm_hash for a in self.allocations.values()}

    # --- operations -----------------------------------------------------------------------

    def can_allocate(self, num_embeds: int, budget: int, planned: int) -> bool:
        """ECD-4: within the budget, and fits the free slots with what is planned."""
        return num_embeds <= budget and num_embeds + planned <= self.num_free_slots

    def allocate(self, request: RequestView, input_id: int) -> Allocation:
        """ECD-1/ECD-3: charge the item to the request; it must hold no allocation yet,
        and fit."""
        item = request.items[input_id]
        key = (request.request_id, input_id)
        if key in self.allocations:
            raise ModelPreconditionError(f"{key} is allocated already")
        if item.num_embeds > self.num_free_slots:
            raise ModelPreconditionError(
                f"allocate of {key} ({item.num_embeds}) with {self.num_free_slots} free slots"
            )
        allocation = Allocation(item.mm_hash, item.num_embeds)
        self.allocations[key] = allocation
        self.allocated_this_step.append(item.mm_hash)
        return allocation

    def release(self, request_id: str, input_id: int) -> Allocation | None:
        """ECD-2: drop the item's live allocation; ``None`` (and nothing changes) when it
        holds none."""
        return self.allocations.pop((request_id, input_id), None)

    def free(self, request_id: str) -> list[int]:
        """ECD-2: release every live allocation of the request; the items released."""
        released = sorted(self.cached_input_ids(request_id))
        for input_id in released:
            del self.allocations[(request_id, input_id)]
        return released

    def drain(self) -> list[str]:
        """ECD-5: the hashes this drain must list (allocated in the step before), and the
        step boundary: this step's allocations are the next drain's."""
        required, self.to_report = self.to_report, self.allocated_this_step
        self.allocated_this_step = []
        return required

    def reset(self) -> None:
        """ECD-6: every allocation released; nothing is required of the next drain."""
        self.allocations.clear()
        self.allocated_this_step = []
        self.to_report = []

"""The trusted model of the encoder cache manager (ECM-1..7, ECM-9), written from SPEC.md alone.

It keeps the least state that states the clauses directly:

* ``sizes``: held entries, ``mm_hash -> num_embeds`` (units are embeddings, ECM-1);
* ``uses``: for each request, its referenced items, ``input_id -> mm_hash``. A
  reference is taken through one item (a hit or an allocation for it, ECM-6), and
  ``cached`` is *derived*: a request references a hash iff one of its referenced items
  carries it, so a reference lasts until its last referenced item is released;
* ``freeable``: held entries no request references, oldest release first (ECM-2);
* ``evicted_since_drain``: every eviction since the last drain, in order (ECM-7).

Slot counts are sums over these structures, never counters kept in step. The model is
deliberately slow and plain: it must be obviously right, not fast.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from spec.types import RequestView


class ModelPreconditionError(AssertionError):
    """The caller drove the model outside the protocol SPEC.md describes (a bug in the
    machine or property, not in the implementation under test)."""


@dataclass(frozen=True)
class Reference:
    """Outcome of a reference-taking operation, for narration and transitions."""

    mm_hash: str
    was_freeable: bool
    #: how many of the request's items carry this hash (2+: a duplicate in the request)
    items_with_hash: int


@dataclass(frozen=True)
class Release:
    """Outcome of releasing one item: ``became_freeable`` when it was the last reference
    to the hash in the whole cache; ``still_used_by_request`` counts the request's other
    referenced items with the same hash (ECM-6 keeps the reference while positive)."""

    mm_hash: str
    became_freeable: bool
    still_used_by_request: int


class EncoderCacheModel:
    """A dict-and-OrderedDict model of ``EncoderCacheManager`` (ECM-1..7, ECM-9)."""

    def __init__(self, cache_size: int) -> None:
        if cache_size < 0:
            raise ModelPreconditionError(f"cache_size must be >= 0, got {cache_size}")
        self.cache_size = cache_size
        self.sizes: dict[str, int] = {}
        self.uses: dict[str, dict[int, str]] = {}
        self.freeable: OrderedDict[str, int] = OrderedDict()
        self.evicted_since_drain: list[str] = []
        #: hashes the next drain may list or not: those evicted or held before a
        #: ``reset`` (ECM-9: the worker's cache is reset with it, and drops are idempotent)
        self.may_drain: set[str] = set()

    # --- observable state (ECM-1, ECM-2, ECM-3) -----------------------------------------

    @property
    def num_free_slots(self) -> int:
        """ECM-1: capacity minus the sizes of all held entries."""
        return self.cache_size - sum(self.sizes.values())

    @property
    def num_freeable_slots(self) -> int:
        """ECM-1: free slots plus the sizes of the unreferenced entries."""
        return self.num_free_slots + sum(self.freeable.values())

    def referencing(self, mm_hash: str) -> set[str]:
        """The requests that reference ``mm_hash``: those with a referenced item of it."""
        return {rid for rid, items in self.uses.items() if mm_hash in items.values()}

    def cached(self) -> dict[str, set[str]]:
        """ECM-3: every held hash with the set of requests referencing it."""
        return {mm_hash: self.referencing(mm_hash) for mm_hash in self.sizes}

    def cached_input_ids(self, request_id: str) -> set[int]:
        """ECM-3: the request's items it currently references."""
        return set(self.uses.get(request_id, {}))

    def uses_of(self, request_id: str, mm_hash: str) -> int:
        """How many of the request's referenced items carry ``mm_hash``."""
        return sum(1 for h in self.uses.get(request_id, {}).values() if h == mm_hash)

    def is_held(self, mm_hash: str) -> bool:
        return mm_hash in self.sizes

    # --- operations ---------------------------------------------------------------------

    def check_and_update_cache(self, request: RequestView, input_id: int) -> Reference | None:
        """ECM-3: a hit (``Reference``) iff the hash is held; the request then references
        it through this item only (ECM-6) and it leaves ``freeable``. ``None`` is a miss
        and changes nothing."""
        item = request.items[input_id]
        if item.mm_hash not in self.sizes:
            return None
        if self.sizes[item.mm_hash] != item.num_embeds:
            raise ModelPreconditionError(
                f"{item.mm_hash} is held with {self.sizes[item.mm_hash]} embeddings, "
                f"not {item.num_embeds}"
            )
        return self._reference(request, input_id, item.mm_hash)

    def can_allocate(
        self, num_embeds: int, encoder_compute_budget: int, num_embeds_to_schedule: int
    ) -> tuple[bool, list[str]]:
        """ECM-4/ECM-5: the verdict and the hashes evicted (oldest release first, only
        as many as needed to make ``num_embeds + num_embeds_to_schedule`` slots free)."""
        needed = num_embeds + num_embeds_to_schedule
        if num_embeds > encoder_compute_budget or needed > self.num_freeable_slots:
            return False, []
        evicted: list[str] = []
        while needed > self.num_free_slots:
            mm_hash, _ = self.freeable.popitem(last=False)
            del self.sizes[mm_hash]
            evicted.append(mm_hash)
        self.evicted_since_drain.extend(evicted)
        return True, evicted

    def allocate(self, request: RequestView, input_id: int) -> Reference:
        """ECM-3: hold the entry (it must not be held, and must fit) and reference it."""
        item = request.items[input_id]
        if item.mm_hash in self.sizes:
            raise ModelPreconditionError(f"allocate of {item.mm_hash}, which is already held")
        if item.num_embeds > self.num_free_slots:
            raise ModelPreconditionError(
                f"allocate of {item.mm_hash} ({item.num_embeds}) with "
                f"{self.num_free_slots} free slots"
            )
        self.sizes[item.mm_hash] = item.num_embeds
        return self._reference(request, input_id, item.mm_hash)

    def free_encoder_input(self, request_id: str, input_id: int) -> Release | None:
        """ECM-6: release one referenced item. The hash becomes freeable (newest) only
        when no item of any request references it any more. ``None``: not referenced."""
        items = self.uses.get(request_id)
        if items is None or input_id not in items:
            return None
        mm_hash = items.pop(input_id)
        if not items:
            del self.uses[request_id]
        became_freeable = not self.referencing(mm_hash)
        if became_freeable:
            self.freeable[mm_hash] = self.sizes[mm_hash]
        return Release(mm_hash, became_freeable, self.uses_of(request_id, mm_hash))

    def free(self, request_id: str) -> list[str]:
        """Release every item the request references (finish, abort, preemption).
        Returns the hashes that became freeable. SPEC.md does not order entries released
        by one call, so the caller may reorder them with :meth:`adopt_release_order`."""
        newly_freeable: list[str] = []
        for input_id in sorted(self.cached_input_ids(request_id)):
            release = self.free_encoder_input(request_id, input_id)
            if release is not None and release.became_freeable:
                newly_freeable.append(release.mm_hash)
        return newly_freeable

    def adopt_release_order(self, order: Iterable[str]) -> None:
        """Order the entries released together by one ``free`` as the implementation did
        (moving each to the newest end in turn); they must be the newest entries."""
        for mm_hash in order:
            self.freeable.move_to_end(mm_hash)

    def reset(self) -> None:
        """ECM-9: no entry held, nothing freeable or referenced; what was evicted or held
        before may still be drained."""
        self.may_drain |= set(self.evicted_since_drain) | set(self.sizes)
        self.sizes.clear()
        self.uses.clear()
        self.freeable.clear()
        self.evicted_since_drain = []

    def get_freed_mm_hashes(self) -> list[str]:
        """ECM-7: the hashes evicted since the last drain and not held now (each listed
        once here; an implementation may repeat one)."""
        drained: list[str] = []
        for mm_hash in self.evicted_since_drain:
            if mm_hash not in self.sizes and mm_hash not in drained:
                drained.append(mm_hash)
        self.evicted_since_drain = []
        self.may_drain = set()
        return drained

    # --- helpers ------------------------------------------------------------------------

    def _reference(self, request: RequestView, input_id: int, mm_hash: str) -> Reference:
        """ECM-6: the request references ``mm_hash`` through item ``input_id``."""
        was_freeable = self.freeable.pop(mm_hash, None) is not None
        self.uses.setdefault(request.request_id, {})[input_id] = mm_hash
        return Reference(mm_hash, was_freeable, self.uses_of(request.request_id, mm_hash))

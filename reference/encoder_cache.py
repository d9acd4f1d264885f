"""The encoder cache manager (ECM-1..9, HASH-6): scheduler-side bookkeeping of
encoder outputs."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType

from spec.errors import EmbedCountMismatchError, InvalidInputError
from spec.types import RequestView


def check_count(name: str, value: object) -> int:
    """``value`` as a count: an int (not a bool) >= 0, else InvalidInputError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise InvalidInputError(f"{name} must be >= 0, got {value}")
    return value


class EncoderCacheManager:
    """Tracks which encoder outputs are held, who uses them, and what to evict.

    Mirrors vLLM's ``vllm/v1/core/encoder_cache_manager.py::EncoderCacheManager``
    (with the later fixes: ``request_hash_refs`` for repeated items, the count check of
    ``_reject_on_encoder_cache_embed_mismatch``, and the drain filter of
    ``get_freed_mm_hashes``). It does no tensor work: the worker holds the
    embeddings and learns what to drop from ``get_freed_mm_hashes``.

    **Units.** Everything is measured in encoder *embeddings* (``num_embeds``, the
    popcount of ``is_embed``), not in prompt tokens or entries: break tokens of a
    row-break range cost nothing here (ECM-1).

    **Entries.** An entry is one ``mm_hash`` with the ``num_embeds`` it was allocated
    with. It is *held* from ``allocate`` until it is evicted. A held entry is either
    *referenced* (by at least one request) or *freeable* (by none).

    **References** are kept per ``(request, input_id)``. A request references hash
    ``h`` while at least one of its items carrying ``h`` is referenced. When a request
    takes a reference on ``h`` through item ``i`` (a hit in
    ``check_and_update_cache``, or ``allocate``), item ``i`` *only* becomes
    referenced: another item of the request carrying ``h`` takes its own reference
    when the scheduler reaches it (an item that has not been reached must not pin the
    entry: pinning ahead of use can deadlock, SYS-8). The same image twice in one
    prompt is served by one entry, and the entry stays until the last of the items
    that took a reference is released (ECM-6). ``free_encoder_input(r, i)`` releases
    item ``i`` only; ``free(r)`` releases all of them (finish, abort, preemption).
    ``get_cached_input_ids(r)`` lists the referenced items.

    **Freeable.** When the last request stops referencing ``h``, ``h`` is appended to
    ``freeable`` (an ``OrderedDict`` ``mm_hash -> num_embeds``), so ``freeable`` is
    ordered by release time, oldest first. A hit on a freeable entry takes it out of
    ``freeable`` again (ECM-2, ECM-3). ``free(r)`` releases the request's referenced
    items one by one in increasing ``input_id``, exactly as ``free_encoder_input``
    would; so the entries it frees are appended in the order of their *last*
    referenced item.

    **Slots.** ``num_free_slots = cache_size - Σ num_embeds of held entries`` and
    ``num_freeable_slots = num_free_slots + Σ sizes in freeable``; both are derived
    from the state, never kept as separate counters (ECM-1).

    **Admission.** ``can_allocate(r, i, budget, planned)`` answers whether item ``i``
    (``n = num_embeds``) may be encoded this step given the remaining compute budget
    and the ``planned`` embeddings this step already reserved: False iff
    ``n > budget`` or ``n + planned > num_freeable_slots``, and then nothing changes.
    When True and ``n + planned > num_free_slots``, it evicts freeable entries, oldest
    first, only until ``n + planned <= num_free_slots`` (ECM-4, ECM-5), and records
    each evicted hash. ``allocate(r, i)`` then holds the entry and references it; it
    requires that the hash is not held (a held hash is a hit: use
    ``check_and_update_cache``) and that ``num_free_slots`` covers it (i.e. that
    ``can_allocate`` was called), and raises ``InvalidInputError`` otherwise.

    **Freed hashes.** ``get_freed_mm_hashes()`` drains the hashes evicted since the
    last drain, in eviction order, leaving out any that is held again at drain time
    (re-allocated in the same scheduling pass: the worker must keep its tensor); a hash
    evicted twice is listed one time here, though ECM-7 allows a repeat (every consumer
    drops idempotently). The scheduler forwards them to the worker, which drops them
    (ECM-7).

    **Counts.** A hash names content, and content has one embedding count. An item
    presenting a held hash with another ``num_embeds`` is refused with
    ``EmbedCountMismatchError`` and nothing changes (HASH-6): accepting it would free the
    entry with the wrong size later. Only the presented item is judged: another item of
    the request that carries the hash with another count is refused when it is reached
    (the scheduling hook rejects the step then, SCH-11), not before.

    **Requests** are identified by ``request_id``; the ``RequestView`` passed to each
    call gives the item hashes and sizes. References are recorded as ``input_id ->
    mm_hash``, so releasing an item uses the hash it was referenced under; a view
    whose item ``i`` carries a different hash than recorded is refused with
    ``InvalidInputError`` (the caller mixed up requests).
    """

    def __init__(self, cache_size: int) -> None:
        # 0 is allowed: a model without multimodal inputs gets a (0, 0) budget (SCH-9).
        self._cache_size = check_count("cache_size", cache_size)
        # mm_hash -> ids of the requests that reference it (empty: freeable).
        self._cached: dict[str, set[str]] = {}
        # mm_hash -> num_embeds of the held entry.
        self._num_embeds: dict[str, int] = {}
        # request_id -> input_id -> mm_hash, for the request's referenced items.
        self._refs: dict[str, dict[int, str]] = {}
        # Unreferenced held entries, least recently released first.
        self._freeable: OrderedDict[str, int] = OrderedDict()
        # Hashes evicted since the last drain, in eviction order.
        self._freed: list[str] = []

    # --- observable state ------------------------------------------------------------

    @property
    def cache_size(self) -> int:
        return self._cache_size

    @property
    def num_free_slots(self) -> int:
        return self._cache_size - sum(self._num_embeds.values())

    @property
    def num_freeable_slots(self) -> int:
        return self.num_free_slots + sum(self._freeable.values())

    @property
    def cached(self) -> Mapping[str, frozenset[str]]:
        """A read-only snapshot: held ``mm_hash`` -> ids of the requests referencing it."""
        return MappingProxyType({h: frozenset(ids) for h, ids in self._cached.items()})

    @property
    def freeable(self) -> Mapping[str, int]:
        """A copy of the unreferenced entries, oldest release first -> num_embeds."""
        return OrderedDict(self._freeable)

    # --- operations ------------------------------------------------------------------

    def check_and_update_cache(self, request: RequestView, input_id: int) -> bool:
        """True iff the item's hash is held; the request then references it through
        this item (ECM-3, ECM-6). Raises ``EmbedCountMismatchError`` and
        changes nothing when the held entry has another size (HASH-6)."""
        mm_hash, num_embeds = self._item(request, input_id)
        if mm_hash not in self._cached:
            return False
        if num_embeds != self._num_embeds[mm_hash]:
            raise EmbedCountMismatchError(
                f"request {request.request_id} item {input_id} presents {mm_hash} with "
                f"{num_embeds} embeddings, but the entry holds {self._num_embeds[mm_hash]}"
            )
        self._reference(request, input_id, mm_hash)
        return True

    def can_allocate(
        self,
        request: RequestView,
        input_id: int,
        encoder_compute_budget: int,
        num_embeds_to_schedule: int,
    ) -> bool:
        """ECM-4 and ECM-5: see the class docstring."""
        _, num_embeds = self._item(request, input_id)
        budget = check_count("encoder_compute_budget", encoder_compute_budget)
        planned = check_count("num_embeds_to_schedule", num_embeds_to_schedule)
        if num_embeds > budget:
            return False
        needed = num_embeds + planned
        if needed > self.num_freeable_slots:
            return False
        while needed > self.num_free_slots:
            evicted, _ = self._freeable.popitem(last=False)
            del self._cached[evicted]
            del self._num_embeds[evicted]
            self._freed.append(evicted)
        return True

    def allocate(self, request: RequestView, input_id: int) -> None:
        """Hold the item's entry and reference it (after ``can_allocate``)."""
        mm_hash, num_embeds = self._item(request, input_id)
        if mm_hash in self._cached:
            raise InvalidInputError(
                f"request {request.request_id} item {input_id}: {mm_hash} is already held; "
                "a held hash is a hit (check_and_update_cache), not an allocation"
            )
        if num_embeds > self.num_free_slots:
            raise InvalidInputError(
                f"request {request.request_id} item {input_id} needs {num_embeds} slots but "
                f"only {self.num_free_slots} are free; can_allocate must succeed first"
            )
        self._cached[mm_hash] = set()
        self._num_embeds[mm_hash] = num_embeds
        self._reference(request, input_id, mm_hash)

    def free_encoder_input(self, request: RequestView, input_id: int) -> None:
        """Release item ``input_id`` of the request; the request stops referencing the
        hash when none of its items carrying it is still referenced (ECM-6). Releasing
        an item that is not referenced does nothing."""
        self._item(request, input_id)
        refs = self._refs.get(request.request_id, {})
        if input_id in refs:
            self._release(request.request_id, [input_id])

    def free(self, request: RequestView) -> None:
        """Release every reference the request holds."""
        if not isinstance(request, RequestView):
            raise InvalidInputError(f"request must be a RequestView, got {type(request).__name__}")
        refs = self._refs.get(request.request_id, {})
        self._release(request.request_id, sorted(refs))

    def get_cached_input_ids(self, request: RequestView) -> set[int]:
        """The request's items it currently references (a fresh set)."""
        if not isinstance(request, RequestView):
            raise InvalidInputError(f"request must be a RequestView, got {type(request).__name__}")
        return set(self._refs.get(request.request_id, {}))

    def reset(self) -> None:
        """Forget every entry and reference (ECM-9: new weights make every held output
        stale). The drain list is kept: the worker's cache is reset with this one, and
        reporting a hash it no longer holds is harmless (ECM-7)."""
        self._cached.clear()
        self._num_embeds.clear()
        self._refs.clear()
        self._freeable.clear()

    def tracked_request_ids(self) -> frozenset[str]:
        """Requests with state here: those with a referenced item (ECM-8)."""
        return frozenset(self._refs)

    def tracked_mm_hashes(self) -> frozenset[str]:
        """Hashes with per-entry state here: sizes, referencing sets, freeable (ECM-8)."""
        return frozenset(self._cached) | frozenset(self._num_embeds) | frozenset(self._freeable)

    def get_freed_mm_hashes(self) -> list[str]:
        """Drain: hashes evicted since the last drain that are not held now, in order of
        first eviction, without the repeats ECM-7 allows."""
        freed = [h for h in dict.fromkeys(self._freed) if h not in self._cached]
        self._freed = []
        return freed

    # --- helpers ---------------------------------------------------------------------

    def _item(self, request: RequestView, input_id: int) -> tuple[str, int]:
        """The item's hash and size, after checking the request, the index, and that
        the item agrees with the hash its reference was recorded under."""
        if not isinstance(request, RequestView):
            raise InvalidInputError(f"request must be a RequestView, got {type(request).__name__}")
        item = request.item(input_id)  # raises InvalidInputError when out of range
        recorded = self._refs.get(request.request_id, {}).get(input_id)
        if recorded is not None and recorded != item.mm_hash:
            raise InvalidInputError(
                f"request {request.request_id} item {input_id} carries {item.mm_hash}, but "
                f"its reference was taken for {recorded}: a different request view?"
            )
        return item.mm_hash, item.num_embeds

    def _reference(self, request: RequestView, input_id: int, mm_hash: str) -> None:
        """The request references ``mm_hash`` through item ``input_id`` only: an item
        that has not taken a reference must not pin the entry (SYS-8)."""
        if mm_hash in self._freeable:  # it was unreferenced; now it is referenced again
            del self._freeable[mm_hash]
        self._cached[mm_hash].add(request.request_id)
        self._refs.setdefault(request.request_id, {})[input_id] = mm_hash

    def _release(self, request_id: str, input_ids: list[int]) -> None:
        refs = self._refs.get(request_id, {})
        for input_id in input_ids:
            mm_hash = refs.pop(input_id)
            if mm_hash in refs.values():
                continue  # another item of this request still uses the entry
            holders = self._cached[mm_hash]
            holders.discard(request_id)
            if not holders:
                self._freeable[mm_hash] = self._num_embeds[mm_hash]
        if not refs:
            self._refs.pop(request_id, None)

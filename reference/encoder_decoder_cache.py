"""The encoder-decoder cache manager (ECD-1..6): the scheduler-side budget of a
cross-attention model's encoder outputs."""

from __future__ import annotations

from reference.encoder_cache import check_count
from spec.errors import InvalidInputError
from spec.types import MultiModalItem, RequestView


class EncoderDecoderCacheManager:
    """Counts the encoder outputs in flight and tells the worker when to drop them.

    Mirrors vLLM's ``vllm/v1/core/encoder_cache_manager.py::EncoderDecoderCacheManager``
    (with its releases made idempotent). A cross-attention model (Whisper) encodes a
    request's inputs at its first step and consumes the outputs in that step (their
    cross-attention KV goes into the KV cache): nothing is shared between requests or
    kept across steps.

    **Allocations.** ``allocate(r, i)`` charges item ``i``'s ``num_embeds`` to request
    ``r`` (units are embeddings: break tokens cost nothing). Each allocation is its own,
    whatever hash it carries: two requests with the same audio are encoded twice and
    charged twice (ECD-3), and ``check_and_update_cache`` never hits. They are kept as
    ``request_id -> input_id -> num_embeds``; ``num_free_slots`` is the cache size less
    their sum, derived, never a counter kept in step (ECD-1).

    **Releases** are idempotent (ECD-2): ``free_encoder_input(r, i)`` drops r's
    allocation of item ``i`` if there is one, and does nothing otherwise — vLLM's
    scheduler releases every listed item on every step once the request has computed a
    token, and ``free(r)`` also runs for requests that allocated nothing.
    ``get_cached_input_ids(r)`` lists exactly the items holding an allocation.

    **Admission.** ``can_allocate(r, i, budget, planned)`` is False iff
    ``n > budget`` or ``n + planned > num_free_slots`` (``n = num_embeds``) and changes
    nothing: there is nothing to evict (ECD-4). ``allocate`` requires that the item
    holds no allocation and that ``num_free_slots`` covers it, and raises
    ``InvalidInputError`` otherwise.

    **Freed hashes.** The worker stores a step's outputs when it executes the step and
    drops what the *next* step's output lists before executing that one. So
    ``get_freed_mm_hashes()``, drained once per step after its allocations, returns the
    hashes allocated in the step before (one entry per allocation), and keeps this
    step's for the next drain (ECD-5).

    **Reset** (ECD-6) forgets every allocation and both lists of hashes: the worker's
    cache is reset with this one.
    """

    def __init__(self, cache_size: int) -> None:
        self._cache_size = check_count("cache_size", cache_size)
        # request_id -> input_id -> num_embeds of its unreleased allocations.
        self._allocations: dict[str, dict[int, int]] = {}
        # Hashes allocated since the last drain, and those the next drain reports.
        self._allocated_this_step: list[str] = []
        self._to_report: list[str] = []

    # --- observable state ------------------------------------------------------------

    @property
    def cache_size(self) -> int:
        return self._cache_size

    @property
    def num_free_slots(self) -> int:
        charged = sum(n for items in self._allocations.values() for n in items.values())
        return self._cache_size - charged

    # --- operations ------------------------------------------------------------------

    def check_and_update_cache(self, request: RequestView, input_id: int) -> bool:
        """Never a hit: no encoder output outlives its step (ECD-3)."""
        _item(request, input_id)
        return False

    def can_allocate(
        self,
        request: RequestView,
        input_id: int,
        encoder_compute_budget: int,
        num_embeds_to_schedule: int,
    ) -> bool:
        """ECD-4: see the class docstring."""
        num_embeds = _item(request, input_id).num_embeds
        budget = check_count("encoder_compute_budget", encoder_compute_budget)
        planned = check_count("num_embeds_to_schedule", num_embeds_to_schedule)
        return num_embeds <= budget and num_embeds + planned <= self.num_free_slots

    def allocate(self, request: RequestView, input_id: int) -> None:
        """Charge the item to the request (after ``can_allocate``)."""
        item = _item(request, input_id)
        items = self._allocations.get(request.request_id, {})
        if input_id in items:
            raise InvalidInputError(
                f"request {request.request_id} item {input_id} is allocated already; "
                "release it before allocating it again"
            )
        if item.num_embeds > self.num_free_slots:
            raise InvalidInputError(
                f"request {request.request_id} item {input_id} needs {item.num_embeds} "
                f"slots but only {self.num_free_slots} are free; can_allocate must "
                "succeed first"
            )
        self._allocations.setdefault(request.request_id, {})[input_id] = item.num_embeds
        self._allocated_this_step.append(item.mm_hash)

    def free_encoder_input(self, request: RequestView, input_id: int) -> None:
        """Release the item's allocation, if it holds one (ECD-2)."""
        _item(request, input_id)
        items = self._allocations.get(request.request_id)
        if items is None or input_id not in items:
            return
        del items[input_id]
        if not items:
            del self._allocations[request.request_id]

    def free(self, request: RequestView) -> None:
        """Release every allocation the request holds."""
        _request(request)
        self._allocations.pop(request.request_id, None)

    def get_cached_input_ids(self, request: RequestView) -> set[int]:
        """The request's items holding an allocation (a fresh set)."""
        _request(request)
        return set(self._allocations.get(request.request_id, {}))

    def get_freed_mm_hashes(self) -> list[str]:
        """Drain: the hashes allocated in the step before this one (ECD-5)."""
        reported, self._to_report = self._to_report, self._allocated_this_step
        self._allocated_this_step = []
        return reported

    def reset(self) -> None:
        """Forget every allocation and pending report (ECD-6)."""
        self._allocations.clear()
        self._allocated_this_step = []
        self._to_report = []


def _request(request: RequestView) -> RequestView:
    if not isinstance(request, RequestView):
        raise InvalidInputError(f"request must be a RequestView, got {type(request).__name__}")
    return request


def _item(request: RequestView, input_id: int) -> MultiModalItem:
    return _request(request).item(input_id)  # raises InvalidInputError when out of range

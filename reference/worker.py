"""The worker-side embedding store (SPEC.md WRK-1..5).

The scheduler's encoder cache manager only *accounts* for encoder outputs; the tensors
live on the worker, keyed by ``mm_hash``. Each step the worker is told which hashes the
scheduler evicted (``freed_mm_hashes``), receives the outputs of the step's encodes, and
serves every scheduled chunk the embedding rows its placeholder positions need. The two
sides agree only if the worker applies the instructions in vLLM's order: drop the freed
hashes first, then store the new outputs (a hash evicted and re-encoded in the same step
must survive, WRK-1), then gather.

Mirrors vLLM v0.22.1 ``vllm/v1/worker/gpu_model_runner.py``: ``_update_states`` (pops
``free_encoder_mm_hashes``), ``_execute_mm_encoder`` (stores ``encoder_cache[mm_hash]``)
and ``_gather_mm_embeddings`` (rows ``get_embeds_indices_in_range(start_idx, end_idx)``).
Where vLLM asserts on a miss, this store raises ``MissingEmbeddingError`` naming the
request and the hash (WRK-5 asks for the hash); it also raises on a miss for a window
that selects no rows, because a gather names an item the chunk overlaps and the
scheduler guarantees such items are held (SCH-8) — a miss there is a split brain worth
reporting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spec.errors import InvalidInputError, MissingEmbeddingError
from spec.types import GatherSpec, WorkerStep


def _validated_outputs(encoder_outputs: Mapping[str, Any]) -> dict[str, NDArray[Any]]:
    """Private copies of the step's encoder outputs, checked before anything changes so
    that a malformed step leaves the store as it was."""
    validated: dict[str, NDArray[Any]] = {}
    for mm_hash, output in encoder_outputs.items():
        if not isinstance(mm_hash, str) or not mm_hash:
            raise InvalidInputError(f"encoder output keyed by {mm_hash!r}: not an mm_hash")
        if not isinstance(output, np.ndarray) or output.ndim != 2:
            shape = getattr(output, "shape", type(output).__name__)
            raise InvalidInputError(
                f"encoder output for {mm_hash} must be a (num_embeds, hidden) array, got {shape}"
            )
        # A copy: the caller may reuse its buffer; the store must not change with it.
        validated[mm_hash] = np.array(output, copy=True)
    return validated


class WorkerStore:
    """Embedding tensors keyed by ``mm_hash`` (WRK-1..5). Built with no arguments."""

    def __init__(self) -> None:
        self._outputs: dict[str, NDArray[Any]] = {}

    def held_hashes(self) -> frozenset[str]:
        return frozenset(self._outputs)

    def execute_step(self, step: WorkerStep) -> list[NDArray[Any]]:
        """Drop the freed hashes, store the step's outputs, then serve each gather in
        order (WRK-1..5). Raises ``MissingEmbeddingError`` for a gather of a hash not
        held (after the frees and stores have been applied) and ``InvalidInputError``
        for malformed outputs or a stored output whose row count disagrees with the
        gather's ``PlaceholderRange``."""
        outputs = _validated_outputs(step.encoder_outputs)
        self._drop(step.freed_mm_hashes)
        self._store(outputs)
        return [self._gather(gather) for gather in step.gathers]

    def _drop(self, mm_hashes: Iterable[str]) -> None:
        # The scheduler may report a hash whose output never reached this worker (an
        # allocation evicted before it was encoded): ignoring it is correct.
        for mm_hash in mm_hashes:
            self._outputs.pop(mm_hash, None)

    def _store(self, outputs: Mapping[str, NDArray[Any]]) -> None:
        self._outputs.update(outputs)

    def _lookup(self, gather: GatherSpec) -> NDArray[Any]:
        stored = self._outputs.get(gather.mm_hash)
        if stored is None:
            raise MissingEmbeddingError(
                f"request {gather.request_id} needs the embeddings of {gather.mm_hash}, "
                f"which the worker does not hold"
            )
        expected = gather.mm_position.get_num_embeds()
        if stored.shape[0] != expected:
            raise InvalidInputError(
                f"request {gather.request_id}: the worker holds {stored.shape[0]} rows for "
                f"{gather.mm_hash}, but its placeholder range takes {expected} embeddings"
            )
        return stored

    def _gather(self, gather: GatherSpec) -> NDArray[Any]:
        """The rows serving placeholder positions ``[start_idx, end_idx)``: positions
        whose ``is_embed`` is False take no row (WRK-3). A copy, so the caller can
        write into it without changing the store."""
        first_row, end_row = gather.mm_position.get_embeds_indices_in_range(
            gather.start_idx, gather.end_idx
        )
        return self._lookup(gather)[first_row:end_row].copy()

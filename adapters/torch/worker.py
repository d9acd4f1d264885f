"""The worker-side embedding store in torch (WRK-1..5): device tensors keyed by
``mm_hash``.

Each step is applied in vLLM's model-runner order: first drop the hashes the scheduler
reports freed, then store the step's encoder outputs (a hash freed and re-encoded in
the same step must survive), then gather, for each scheduled chunk, the embedding rows
its placeholder positions need (``get_embeds_indices_in_range`` honours ``is_embed``).
The store never evicts on its own: what it holds is exactly what the scheduler's
encoder cache manager accounts for (the split brain the engine properties check).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from spec.errors import InvalidInputError, MissingEmbeddingError
from spec.types import GatherSpec, WorkerStep

from .device import DEVICE, NUMPY_FLOATS, to_device, to_numpy


def _check_outputs(outputs: object) -> Mapping[str, NDArray[Any]]:
    if not isinstance(outputs, Mapping):
        raise InvalidInputError(
            f"encoder_outputs must map mm_hash to arrays, got {type(outputs).__name__}"
        )
    for mm_hash, output in outputs.items():
        if not isinstance(mm_hash, str) or not mm_hash:
            raise InvalidInputError(f"encoder_outputs key {mm_hash!r} is not an mm_hash str")
        if not isinstance(output, np.ndarray) or output.ndim != 2:
            raise InvalidInputError(
                f"encoder output for {mm_hash} must be a 2-D numpy array (rows, hidden)"
            )
        if output.dtype not in NUMPY_FLOATS:
            raise InvalidInputError(
                f"encoder output for {mm_hash} has dtype {output.dtype}; expected a float dtype"
            )
    return outputs


class TorchWorkerStore:
    """``spec.components.WorkerStore`` holding device tensors."""

    def __init__(self, device: torch.device = DEVICE) -> None:
        self._device = device
        self._tensors: dict[str, torch.Tensor] = {}

    def execute_step(self, step: WorkerStep) -> list[NDArray[Any]]:
        """Drop ``freed_mm_hashes``, store ``encoder_outputs``, then return the rows
        each gather needs, in order (WRK-1..4). A gather of a hash the store does not
        hold raises ``MissingEmbeddingError``; a held output whose row count is not the
        range's ``get_num_embeds()`` raises ``InvalidInputError`` (WRK-5). Outputs are
        checked before anything changes, so a malformed step leaves the store as it was."""
        if not isinstance(step, WorkerStep):
            raise InvalidInputError(f"execute_step needs a WorkerStep, got {type(step).__name__}")
        outputs = _check_outputs(step.encoder_outputs)
        for mm_hash in step.freed_mm_hashes:
            # A hash whose output never reached the worker (evicted before it was
            # encoded) may be reported freed: ignoring it is correct.
            self._tensors.pop(mm_hash, None)
        for mm_hash, output in outputs.items():
            self._store(mm_hash, to_device(output, self._device))
        return [to_numpy(self._gather(gather)) for gather in step.gathers]

    def held_hashes(self) -> frozenset[str]:
        return frozenset(self._tensors)

    def _store(self, mm_hash: str, tensor: torch.Tensor) -> None:
        self._tensors[mm_hash] = tensor

    def _gather(self, gather: GatherSpec) -> torch.Tensor:
        tensor = self._tensors.get(gather.mm_hash)
        if tensor is None:
            raise MissingEmbeddingError(
                f"request {gather.request_id} needs embeddings of {gather.mm_hash}, "
                "which the worker does not hold"
            )
        expected = gather.mm_position.get_num_embeds()
        if tensor.shape[0] != expected:
            raise InvalidInputError(
                f"request {gather.request_id}: the worker holds {tensor.shape[0]} rows for "
                f"{gather.mm_hash}, but its placeholder range takes {expected} embeddings"
            )
        start, end = gather.mm_position.get_embeds_indices_in_range(
            gather.start_idx, gather.end_idx
        )
        return tensor[start:end]

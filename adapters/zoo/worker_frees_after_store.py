"""Applies the freed hashes after storing the step's encodes (WRK-1)."""

from __future__ import annotations

from typing import Any

from numpy.typing import NDArray

from reference.worker import WorkerStore, _validated_outputs
from spec.adapter import Adapter
from spec.types import WorkerStep


class FreesAfterStoreWorkerStore(WorkerStore):
    def execute_step(self, step: WorkerStep) -> list[NDArray[Any]]:
        self._store(_validated_outputs(step.encoder_outputs))
        self._drop(step.freed_mm_hashes)  # BUG: drops an image re-encoded in this step
        return [self._gather(gather) for gather in step.gathers]


BREAKS = "WRK-1"
KILLED_BY = "wrk_free_before_store"
ORIGIN = (
    "typical student error: the worker stores the step's encodes before applying freed "
    "hashes (vLLM's model runner frees first)"
)
ADAPTER = Adapter(name="zoo.worker_frees_after_store", worker_store=FreesAfterStoreWorkerStore)

"""Drops an image's embeddings after its first gather, so later chunks miss (WRK-4)."""

from __future__ import annotations

from typing import Any

from numpy.typing import NDArray

from reference.worker import WorkerStore
from spec.adapter import Adapter
from spec.types import GatherSpec


class ConsumesOnGatherWorkerStore(WorkerStore):
    def _gather(self, gather: GatherSpec) -> NDArray[Any]:
        rows = super()._gather(gather)
        self._drop([gather.mm_hash])  # BUG: "free early" although later chunks need it
        return rows


BREAKS = "WRK-4"
KILLED_BY = "wrk_chunks_concatenate_to_whole"
ORIGIN = (
    "typical student error: the worker pops an image's embeddings at its first gather, as a "
    "one-shot queue"
)
ADAPTER = Adapter(name="zoo.worker_consumes_on_gather", worker_store=ConsumesOnGatherWorkerStore)

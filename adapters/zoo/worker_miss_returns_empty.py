"""Serves zero rows for a hash it does not hold instead of raising (WRK-5)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from reference.worker import WorkerStore
from spec.adapter import Adapter
from spec.types import GatherSpec


class MissReturnsEmptyWorkerStore(WorkerStore):
    def _lookup(self, gather: GatherSpec) -> NDArray[Any]:
        if gather.mm_hash not in self._outputs:
            return np.zeros((0, 0), dtype=np.float32)  # BUG: a silent miss
        return super()._lookup(gather)


BREAKS = "WRK-5"
KILLED_BY = "wrk_miss_is_an_error"
ORIGIN = (
    "typical student error: `store.get(h, empty)`, serving zero rows instead of raising on a "
    "miss"
)
ADAPTER = Adapter(name="zoo.worker_miss_returns_empty", worker_store=MissReturnsEmptyWorkerStore)

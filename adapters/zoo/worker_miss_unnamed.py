"""Raises on a miss, but with a message that names no hash (WRK-5)."""

from __future__ import annotations

from typing import Any

from numpy.typing import NDArray

from reference.worker import WorkerStore
from spec.adapter import Adapter
from spec.errors import MissingEmbeddingError
from spec.types import GatherSpec


class UnnamedMissWorkerStore(WorkerStore):
    def _lookup(self, gather: GatherSpec) -> NDArray[Any]:
        if gather.mm_hash not in self._outputs:
            raise MissingEmbeddingError("encoder cache miss")  # BUG: which item?
        return super()._lookup(gather)


BREAKS = "WRK-5"
KILLED_BY = "wrk_miss_is_an_error"
ORIGIN = (
    'typical student error: `raise MissingEmbeddingError("cache miss")`, an error that '
    "does not say which item's embeddings are missing"
)
ADAPTER = Adapter(name="zoo.worker_miss_unnamed", worker_store=UnnamedMissWorkerStore)

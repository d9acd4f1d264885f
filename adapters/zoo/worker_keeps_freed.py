"""Never drops the hashes the scheduler reports freed (WRK-2)."""

from __future__ import annotations

from collections.abc import Iterable

from reference.worker import WorkerStore
from spec.adapter import Adapter


class KeepsFreedWorkerStore(WorkerStore):
    def _drop(self, mm_hashes: Iterable[str]) -> None:
        pass  # BUG: evicted embeddings stay in worker memory forever


BREAKS = "WRK-2"
KILLED_BY = "wrk_freed_hash_dropped"
ORIGIN = (
    "typical student error: the worker never reads free_encoder_mm_hashes, so its memory "
    "only grows"
)
ADAPTER = Adapter(name="zoo.worker_keeps_freed", worker_store=KeepsFreedWorkerStore)

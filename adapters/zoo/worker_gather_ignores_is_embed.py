"""Gathers rows [start_idx, end_idx) directly, ignoring is_embed (WRK-3)."""

from __future__ import annotations

from typing import Any

from numpy.typing import NDArray

from reference.worker import WorkerStore
from spec.adapter import Adapter
from spec.types import GatherSpec


class GatherIgnoresIsEmbedWorkerStore(WorkerStore):
    def _gather(self, gather: GatherSpec) -> NDArray[Any]:
        # BUG: positions are not rows when row-break positions take no embedding
        return self._lookup(gather)[gather.start_idx : gather.end_idx].copy()


BREAKS = "WRK-3"
KILLED_BY = "wrk_gather_selects_embed_rows"
ORIGIN = (
    "typical student error: gathering rows [start_idx, end_idx) of the range, not of the "
    "embeddings (is_embed ignored)"
)
ADAPTER = Adapter(
    name="zoo.worker_gather_ignores_is_embed", worker_store=GatherIgnoresIsEmbedWorkerStore
)

"""Returns a view of the stored output, so the caller's writes corrupt it (WRK-3)."""

from __future__ import annotations

from typing import Any

from numpy.typing import NDArray

from reference.worker import WorkerStore
from spec.adapter import Adapter
from spec.types import GatherSpec


class ReturnsViewWorkerStore(WorkerStore):
    def _gather(self, gather: GatherSpec) -> NDArray[Any]:
        first, end = gather.mm_position.get_embeds_indices_in_range(
            gather.start_idx, gather.end_idx
        )
        return self._lookup(gather)[first:end]  # BUG: no copy


BREAKS = "WRK-3"
KILLED_BY = "wrk_gather_selects_embed_rows"
ORIGIN = (
    "library semantics: numpy slicing returns a view, so the caller's writes corrupt the "
    "stored output"
)
ADAPTER = Adapter(name="zoo.worker_returns_view", worker_store=ReturnsViewWorkerStore)

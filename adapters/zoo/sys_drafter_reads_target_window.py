"""The drafter is served the target's window ``[c, c + n)`` instead of its own, shifted
by one: it drafts from the rows one position behind (SYS-13)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numpy.typing import NDArray

from reference.engine import EngineLoop, _Scheduled, chunk_gathers
from spec.adapter import Adapter
from spec.types import WorkerStep

BREAKS = "SYS-13"
KILLED_BY = "EngineDrafterMachine"
ORIGIN = (
    "typical student error: the drafter's gather reuses the target's window; vLLM's "
    "drafter calls _gather_mm_embeddings(scheduler_output, shift_computed_tokens=1)"
)


class DrafterReadsTargetWindow(EngineLoop):
    def _draft_gathers(self, scheduled: Sequence[_Scheduled]) -> list[tuple[NDArray[Any], ...]]:
        if not self._lookahead:
            return [() for _ in scheduled]
        # BUG: no shift: the target's own window
        specs = [
            chunk_gathers(e.state.request, e.num_computed_tokens, e.num_new_tokens)
            for e in scheduled
        ]
        rows = self._worker.execute_step(
            WorkerStep(freed_mm_hashes=(), encoder_outputs={},
                       gathers=tuple(g for chunk in specs for g in chunk))
        )
        drafts: list[tuple[NDArray[Any], ...]] = []
        cursor = 0
        for chunk in specs:
            drafts.append(tuple(rows[cursor : cursor + len(chunk)]))
            cursor += len(chunk)
        return drafts


ADAPTER = Adapter(
    name="zoo.sys_drafter_reads_target_window", engine_loop=DrafterReadsTargetWindow
)

"""Reports evicted hashes in the step output but never tells the worker to drop them,
so worker memory outgrows the encoder cache (SYS-5)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numpy.typing import NDArray

from reference.engine import EngineLoop, _Scheduled
from spec.adapter import Adapter
from spec.components import ScheduledChunk

BREAKS = "SYS-5"
KILLED_BY = "EngineMachine"
ORIGIN = (
    "typical student error: get_freed_mm_hashes drained for the step output but never "
    "applied on the worker (the split-brain)"
)


class SkipsWorkerDrop(EngineLoop):
    def _execute(
        self,
        scheduled: Sequence[_Scheduled],
        freed: tuple[str, ...],
        encoder_outputs: dict[str, NDArray[Any]],
    ) -> list[ScheduledChunk]:
        return super()._execute(scheduled, (), encoder_outputs)  # BUG: freed not forwarded


ADAPTER = Adapter(name="zoo.sys_skips_worker_drop", engine_loop=SkipsWorkerDrop)

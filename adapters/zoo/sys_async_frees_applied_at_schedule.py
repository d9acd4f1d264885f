"""With async scheduling, the worker drops a step's freed hashes when the step is
scheduled rather than when it executes: the step still in flight, scheduled before,
reads an entry the next step's scheduling evicted (SYS-1)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Batch
from spec.adapter import Adapter
from spec.types import WorkerStep

BREAKS = "SYS-1"
KILLED_BY = "EngineAsyncMachine"
ORIGIN = (
    "typical student error: free_encoder_mm_hashes applied as soon as a step is "
    "scheduled; vLLM's runner pops them in _update_states of the step that carries them, "
    "after every step scheduled before it ran"
)


class FreesAppliedAtSchedule(EngineLoop):
    def _schedule(self) -> _Batch:
        batch = super()._schedule()
        if self._async and batch.freed:
            # BUG: the worker drops them now, before the step in flight executes
            self._worker.execute_step(
                WorkerStep(freed_mm_hashes=batch.freed, encoder_outputs={}, gathers=())
            )
            batch.freed = ()
        return batch


ADAPTER = Adapter(
    name="zoo.sys_async_frees_applied_at_schedule", engine_loop=FreesAppliedAtSchedule
)

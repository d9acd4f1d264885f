"""With async scheduling, the batch queue pops the newest batch: each call executes the
step it just scheduled and leaves the older one in flight, so steps run out of the
order they were scheduled in (SYS-15)."""

from __future__ import annotations

from reference.engine import EngineLoop
from spec.adapter import Adapter
from spec.components import StepOutput

BREAKS = "SYS-15"
KILLED_BY = "EngineAsyncMachine"
ORIGIN = (
    "typical student error: the batch queue used as a stack; vLLM's "
    "step_with_batch_queue appendleft()s each new batch and pop()s the oldest"
)


class NewestBatchFirst(EngineLoop):
    def step(self) -> StepOutput:
        if not self._async or self._in_flight is None:
            return super().step()
        older = self._in_flight
        self._in_flight = None
        out = super().step()  # BUG: schedules and executes the new step at once
        self._in_flight = older
        return out


ADAPTER = Adapter(name="zoo.sys_async_newest_batch_first", engine_loop=NewestBatchFirst)

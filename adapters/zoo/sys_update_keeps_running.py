"""``update_weights()`` resets the caches but lets the running requests go on: their KV
computed at the old weights stays under the new ones (SYS-12)."""

from __future__ import annotations

from reference.engine import EngineLoop
from spec.adapter import Adapter

BREAKS = "SYS-12"
KILLED_BY = "EngineResetMachine"
ORIGIN = (
    "typical student error: the caches cleared without reset_running_requests=True "
    "(vLLM's pause_generation(mode='keep', clear_cache=True) preempts every running "
    "request so that it recomputes at the new weights)"
)


class UpdateKeepsRunning(EngineLoop):
    def update_weights(self) -> None:
        # BUG: no preemption; reset_prefix_cache refuses while blocks are in use
        self.reset_prefix_cache()
        self.reset_encoder_cache()
        self._weights_version += 1


ADAPTER = Adapter(name="zoo.sys_update_keeps_running", engine_loop=UpdateKeepsRunning)

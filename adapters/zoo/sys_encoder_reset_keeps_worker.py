"""``reset_encoder_cache()`` resets the scheduler's cache manager but not the worker's
store: the worker keeps embeddings the scheduler no longer accounts for (SYS-11)."""

from __future__ import annotations

from reference.engine import EngineLoop
from spec.adapter import Adapter

BREAKS = "SYS-11"
KILLED_BY = "EngineResetMachine"
ORIGIN = (
    "typical student error: only the scheduler's half of the reset "
    "(Scheduler.reset_encoder_cache); vLLM's EngineCore.reset_encoder_cache also clears "
    "the model runner's encoder_cache (GPUModelRunner.reset_encoder_cache)"
)


class EncoderResetKeepsWorker(EngineLoop):
    def reset_encoder_cache(self) -> None:
        # BUG: the worker store is not emptied
        self._cache.reset()


ADAPTER = Adapter(name="zoo.sys_encoder_reset_keeps_worker", engine_loop=EncoderResetKeepsWorker)

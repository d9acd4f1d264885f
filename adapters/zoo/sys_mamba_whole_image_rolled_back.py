"""A hybrid model with chunked multimodal input disabled: the block alignment ends the
chunk inside an image that starts where the chunk does, the hook rolls the chunk back
to the image's offset — nothing — and the next step does the same (SYS-8)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Request
from spec.adapter import Adapter

BREAKS = "SYS-8"
KILLED_BY = "EngineHybridMachine"
ORIGIN = (
    "vLLM v0.33.0 v1/core/sched/scheduler.py: _mamba_block_aligned_split's cut lands "
    "inside an image and _try_schedule_encoder_inputs' disable_chunked_mm_input "
    "rollback returns the chunk to the image's offset"
)


class WholeImageRolledBack(EngineLoop):
    def _whole_items(self, state: _Request) -> list[tuple[int, int]]:
        return []  # BUG: the alignment ignores that an image must be computed whole


ADAPTER = Adapter(name="zoo.sys_mamba_whole_image_rolled_back", engine_loop=WholeImageRolledBack)

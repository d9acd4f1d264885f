"""The drafter is served the target's window ``[c, c + n)`` instead of its own, shifted
by one: it drafts from the rows one position behind (SYS-13)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Scheduled, chunk_gathers
from spec.adapter import Adapter
from spec.types import GatherSpec

BREAKS = "SYS-13"
KILLED_BY = "EngineDrafterMachine"
ORIGIN = (
    "typical student error: the drafter's gather reuses the target's window; vLLM's "
    "drafter calls _gather_mm_embeddings(scheduler_output, shift_computed_tokens=1)"
)


class DrafterReadsTargetWindow(EngineLoop):
    @staticmethod
    def _draft_window(entry: _Scheduled, held: frozenset[str]) -> list[GatherSpec]:
        # BUG: no shift: the target's own window
        return chunk_gathers(entry.state.request, entry.num_computed_tokens, entry.num_new_tokens)


ADAPTER = Adapter(
    name="zoo.sys_drafter_reads_target_window", engine_loop=DrafterReadsTargetWindow
)

"""A waiting request that the hook cuts to zero tokens keeps the references the hook
took, pinning cache entries while it waits (vLLM v0.22.1 breaks without releasing)
(SYS-7)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Request
from spec.adapter import Adapter

BREAKS = "SYS-7"
KILLED_BY = "EngineMachine"
ORIGIN = (
    "vLLM v0.22.1 v1/core/sched/scheduler.py: a waiting request cut to zero tokens breaks "
    "out of the loop without releasing the references the hook took (v0.33.0 skips it "
    "instead, still keeping them: SYS-7 says which wins)"
)


class WaitingKeepsRefs(EngineLoop):
    def _release_unscheduled(self, state: _Request) -> None:
        pass  # BUG: references taken by check_and_update_cache stay


ADAPTER = Adapter(name="zoo.sys_waiting_keeps_refs", engine_loop=WaitingKeepsRefs)

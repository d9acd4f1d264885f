"""Preemption discards the tokens the request generated, so it resumes from a bare
prompt and samples them again (SYS-10)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Request
from spec.adapter import Adapter

BREAKS = "SYS-10"
KILLED_BY = "EngineMachine"
ORIGIN = (
    "typical student error: `output_token_ids.clear()` on preemption (mmspec's own "
    "reference did it before issue 23), which vLLM's Scheduler._preempt_request never "
    "does in v0.22.1 or v0.33.0"
)


class PreemptDiscardsOutputs(EngineLoop):
    def _preempt(self, state: _Request) -> None:
        super()._preempt(state)
        state.output_token_ids.clear()  # BUG: the generated tokens are part of the request


ADAPTER = Adapter(name="zoo.sys_preempt_discards_outputs", engine_loop=PreemptDiscardsOutputs)

"""Preemption discards the tokens the request generated, so it resumes from a bare
prompt and samples them again (SYS-10)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Request
from spec.adapter import Adapter

BREAKS = "SYS-10"
KILLED_BY = "EngineMachine"
ORIGIN = (
    "mmspec's own reference before issue 23: `_preempt` cleared `output_token_ids`, which "
    "vLLM's Scheduler._preempt_request (v0.22.1 and v0.33.0) never does"
)


class PreemptDiscardsOutputs(EngineLoop):
    def _preempt(self, state: _Request) -> None:
        super()._preempt(state)
        state.output_token_ids.clear()  # BUG: the generated tokens are part of the request


ADAPTER = Adapter(name="zoo.sys_preempt_discards_outputs", engine_loop=PreemptDiscardsOutputs)

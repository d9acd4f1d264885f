"""Preemption keeps the generated tokens but the resumed request recomputes only its
prompt: it samples again as soon as the prompt is back, although the KV of the tokens it
had generated was never recomputed (SYS-10)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Request, _StepBudget, sampled_token_id
from spec.adapter import Adapter, EngineParts
from spec.types import EngineConfig, ScheduleDecision

BREAKS = "SYS-10"
KILLED_BY = "EngineMachine"
ORIGIN = (
    "typical student error: outputs kept on preemption (as vLLM does) but the re-prefill "
    "bounded by len(prompt), not num_tokens (vLLM's waiting loop uses request.num_tokens "
    "'to consider the resumed requests, which have output tokens')"
)


class PreemptSkipsOutputKV(EngineLoop):
    def __init__(self, config: EngineConfig, parts: EngineParts) -> None:
        super().__init__(config, parts)
        #: preempted after generating tokens, prompt not yet recomputed
        self._resumed: set[str] = set()

    def _preempt(self, state: _Request) -> None:
        super()._preempt(state)
        if state.output_token_ids:
            self._resumed.add(state.request_id)

    def _prefix_hit(self, state: _Request) -> list[int]:
        hits = super()._prefix_hit(state)
        return hits[: (state.num_prompt_tokens - 1) // self._kv.block_size]

    def _try_schedule(
        self, state: _Request, computed: int, budget: _StepBudget
    ) -> ScheduleDecision:
        if state.request_id not in self._resumed:
            return super()._try_schedule(state, computed, budget)
        # BUG: the re-prefill stops at the prompt; the generated tokens get no KV
        proposed = min(state.num_prompt_tokens - computed, budget.tokens)
        return self._hook.try_schedule_encoder_inputs(
            state.view, computed, proposed, budget.encoder, self._cache
        )

    def _cache_full_blocks(self, state: _Request) -> None:
        super()._cache_full_blocks(state)
        if state.request_id in self._resumed and (
            state.num_computed_tokens == state.num_prompt_tokens
        ):
            self._resumed.discard(state.request_id)
            # BUG: caught up with the prompt, it samples as if it had caught up with
            # the generated tokens too
            state.output_token_ids.append(sampled_token_id(len(state.output_token_ids)))


ADAPTER = Adapter(name="zoo.sys_preempt_skips_output_kv", engine_loop=PreemptSkipsOutputKV)

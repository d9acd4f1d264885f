"""A chunk the token budget cuts short of its drafts still verifies every draft the
request had: it reports (and may accept) drafts at positions it never computed
(SYS-14)."""

from __future__ import annotations

from reference.engine import EngineLoop, _Request
from spec.adapter import Adapter

BREAKS = "SYS-14"
KILLED_BY = "EngineDrafterMachine"
ORIGIN = (
    "typical student error: the drafts are not cut with the chunk; vLLM's running loop "
    "trims spec_token_ids to num_scheduled_spec_tokens = num_new_tokens + "
    "num_computed_tokens - num_tokens"
)


class DraftCountNotTrimmed(EngineLoop):
    @staticmethod
    def _drafts_reached(state: _Request, computed: int, new: int) -> tuple[int, ...]:
        return tuple(state.spec_token_ids)  # BUG: not cut to the chunk's positions


ADAPTER = Adapter(name="zoo.sys_draft_count_not_trimmed", engine_loop=DraftCountNotTrimmed)

"""The target accepts every draft without comparing it with what it samples: a wrong
guess becomes a computed position whose KV holds a token the request never generated
(SYS-6)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numpy.typing import NDArray

from reference.engine import EngineLoop, _Scheduled
from spec.adapter import Adapter
from spec.components import ScheduledChunk

BREAKS = "SYS-6"
KILLED_BY = "EngineDrafterMachine"
ORIGIN = (
    "typical student error: drafts accepted by count, not verified; vLLM's "
    "RejectionSampler accepts the longest prefix of drafts the target agrees with"
)


class EveryDraftAccepted(EngineLoop):
    def _execute(
        self,
        scheduled: Sequence[_Scheduled],
        freed: tuple[str, ...],
        encoder_outputs: dict[str, NDArray[Any]],
    ) -> list[ScheduledChunk]:
        chunks = super()._execute(scheduled, freed, encoder_outputs)
        for entry in scheduled:
            entry.accepted = len(entry.drafts)  # BUG: no verification
        return [
            ScheduledChunk(**{**vars(chunk), "num_accepted_drafts": len(entry.drafts)})
            for chunk, entry in zip(chunks, scheduled, strict=True)
        ]


ADAPTER = Adapter(name="zoo.sys_every_draft_accepted", engine_loop=EveryDraftAccepted)

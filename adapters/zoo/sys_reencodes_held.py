"""Encodes every image a chunk reads, even when the encoder cache already holds its
output (the seed article's cacheless pipeline) (SYS-3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numpy.typing import NDArray

from reference.engine import EngineLoop, _Scheduled
from spec.adapter import Adapter

BREAKS = "SYS-3"
KILLED_BY = "EngineMachine"
ORIGIN = (
    "seed 004 MultimodalServingEngine: the cacheless pipeline that encodes every image on "
    "every request"
)


class ReencodesHeld(EngineLoop):
    def _encode(self, scheduled: Sequence[_Scheduled]) -> dict[str, NDArray[Any]]:
        outputs = super()._encode(scheduled)
        for entry in scheduled:  # BUG: held items are encoded again
            request = entry.state.request
            for spec in self._gathers(entry):
                index = next(i for i, it in enumerate(request.items) if it.mm_hash == spec.mm_hash)
                if spec.mm_hash not in outputs:
                    outputs[spec.mm_hash] = self._encoder.encode(
                        request.data[index], request.items[index].num_embeds
                    )
        return outputs


ADAPTER = Adapter(name="zoo.sys_reencodes_held", engine_loop=ReencodesHeld)

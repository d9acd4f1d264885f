"""The count-mismatch error gives the total only, without the per-item expression
(SPL-3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from reference.splice import Splice
from spec.adapter import Adapter
from spec.errors import SpliceCountError

BREAKS = "SPL-3"
KILLED_BY = "spl_count_mismatch_message"
ORIGIN = (
    "typical student error: a hand-written count check that reports totals, not vLLM's "
    "per-item `a + b = n` expression"
)


class WrongMessage(Splice):
    def merge(
        self,
        inputs_embeds: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[Any]:
        try:
            return super().merge(inputs_embeds, mm_embeds, is_multimodal)
        except SpliceCountError:
            rows, slots = sum(len(e) for e in mm_embeds), int(np.sum(is_multimodal))
            # BUG: no "<expr> =" part
            raise SpliceCountError(
                f"Attempted to assign {rows} multimodal tokens to {slots} placeholders"
            ) from None


ADAPTER = Adapter(name="zoo.spl_wrong_message", splice=WrongMessage)

"""A single embedding row is broadcast over every placeholder, as torch's index_put
does (SPL-4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from reference.splice import Splice
from spec.adapter import Adapter

BREAKS = "SPL-4"
KILLED_BY = "spl_no_broadcast"
ORIGIN = (
    "library semantics: numpy/torch broadcasting lets `inputs_embeds[mask] = row` spread a "
    "single row over any number of positions"
)


class BroadcastsSingleRow(Splice):
    def merge(
        self,
        inputs_embeds: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[Any]:
        if sum(len(e) for e in mm_embeds) == 1 and int(np.sum(is_multimodal)) > 1:
            merged = inputs_embeds.copy()
            merged[is_multimodal] = np.concatenate(list(mm_embeds))  # BUG: broadcasts
            return merged
        return super().merge(inputs_embeds, mm_embeds, is_multimodal)


ADAPTER = Adapter(name="zoo.spl_broadcast_single_row", splice=BroadcastsSingleRow)

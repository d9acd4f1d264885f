"""The splice works in float16 and casts back: text rows lose precision (SPL-1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from reference.splice import Splice
from spec.adapter import Adapter

BREAKS = "SPL-1"
KILLED_BY = "spl_text_rows_untouched"
ORIGIN = (
    "typical student error: splicing in the encoder's float16 and casting the whole array "
    "back, rounding the text rows"
)


class HalfRoundTrip(Splice):
    def merge(
        self,
        inputs_embeds: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[Any]:
        half = inputs_embeds.astype(np.float16)  # BUG: every row goes through float16
        return super().merge(half, mm_embeds, is_multimodal).astype(inputs_embeds.dtype)


ADAPTER = Adapter(name="zoo.spl_roundtrips_half", splice=HalfRoundTrip)

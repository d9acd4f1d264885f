"""The splice concatenates the items' embeddings in reverse order (SPL-2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numpy.typing import NDArray

from reference.splice import Splice
from spec.adapter import Adapter

BREAKS = "SPL-2"
KILLED_BY = "spl_rows_in_order"
ORIGIN = (
    "typical student error: embeddings gathered from a dict or stack in reverse insertion "
    "order"
)


class ReversedItems(Splice):
    def merge(
        self,
        inputs_embeds: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[Any]:
        return super().merge(inputs_embeds, list(mm_embeds)[::-1], is_multimodal)  # BUG


ADAPTER = Adapter(name="zoo.spl_reversed_items", splice=ReversedItems)

"""An empty embedding list returns the input unchanged, as vLLM v0.22.1's early return
does, leaving placeholders on dummy embeddings (SPL-4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numpy.typing import NDArray

from reference.splice import Splice
from spec.adapter import Adapter

BREAKS = "SPL-4"
KILLED_BY = "spl_no_broadcast"
ORIGIN = (
    "vLLM v0.22.1 model_executor/models/utils.py::_merge_multimodal_embeddings returns early "
    "on an empty list"
)


class EmptyListNoop(Splice):
    def merge(
        self,
        inputs_embeds: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[Any]:
        if len(mm_embeds) == 0:
            return inputs_embeds  # BUG: placeholders keep whatever they held
        return super().merge(inputs_embeds, mm_embeds, is_multimodal)


ADAPTER = Adapter(name="zoo.spl_empty_list_noop", splice=EmptyListNoop)

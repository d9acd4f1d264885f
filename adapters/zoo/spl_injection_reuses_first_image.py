"""Injection puts the first image's rows at every marker (seed 004's one tensor reused
for every marker) (SPL-5)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numpy.typing import NDArray

from reference.splice import Splice
from spec.adapter import Adapter

BREAKS = "SPL-5"
KILLED_BY = "spl_injection_commutes"
ORIGIN = "seed 004 TokenInjector.inject: one `visual_tokens` tensor placed at every <image> marker"


class ReusesFirstImage(Splice):
    def inject(
        self,
        input_ids: Sequence[int],
        text_embeds: NDArray[Any],
        visual_tokens: Sequence[NDArray[Any]],
        marker_id: int,
    ) -> NDArray[Any]:
        # BUG: one tensor for every marker
        same = [visual_tokens[0]] * len(visual_tokens) if visual_tokens else []
        return super().inject(input_ids, text_embeds, same, marker_id)


ADAPTER = Adapter(name="zoo.spl_injection_reuses_first_image", splice=ReusesFirstImage)

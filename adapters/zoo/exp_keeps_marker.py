"""The marker token survives expansion, after its image's placeholders (EXP-1)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.processor import Processor
from spec.adapter import Adapter
from spec.types import ExpandedPrompt, ImageInput, PlaceholderRange

BREAKS = "EXP-1"
KILLED_BY = "exp_total_length"
ORIGIN = (
    "typical student error: inserting the placeholders after the marker instead of replacing "
    "it (off by one in the total length)"
)


class KeepsMarker(Processor):
    def expand(self, prompt: Sequence[int], images: Sequence[ImageInput]) -> ExpandedPrompt:
        out = super().expand(prompt, images)
        tokens = list(out.token_ids)
        for r in reversed(out.ranges):
            tokens.insert(r.end, self._config.marker_id)  # BUG: the marker is kept
        ranges = tuple(PlaceholderRange(r.offset + i, r.length, r.is_embed)
                       for i, r in enumerate(out.ranges))
        return ExpandedPrompt(tuple(tokens), ranges)


ADAPTER = Adapter(name="zoo.exp_keeps_marker", processor=KeepsMarker)

"""Every PlaceholderRange starts one position late (EXP-2)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.processor import Processor
from spec.adapter import Adapter
from spec.types import ExpandedPrompt, ImageInput, PlaceholderRange

BREAKS = "EXP-2"
KILLED_BY = "exp_ranges_well_formed"
ORIGIN = (
    "typical student error: the offset recorded after appending the marker position "
    "(`len(out)` one step late)"
)


class OffByOneOffset(Processor):
    def expand(self, prompt: Sequence[int], images: Sequence[ImageInput]) -> ExpandedPrompt:
        out = super().expand(prompt, images)
        # BUG: offset counted from 1
        ranges = tuple(PlaceholderRange(r.offset + 1, r.length, r.is_embed) for r in out.ranges)
        return ExpandedPrompt(out.token_ids, ranges)


ADAPTER = Adapter(name="zoo.exp_off_by_one_offset", processor=OffByOneOffset)

"""The text after the last image is dropped from the expanded prompt (EXP-3)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.processor import Processor
from spec.adapter import Adapter
from spec.types import ExpandedPrompt, ImageInput

BREAKS = "EXP-3"
KILLED_BY = "exp_text_preserved"
ORIGIN = (
    "typical student error: the expansion loop copies the text before each marker and "
    "forgets the tail after the last one (seed 004's injector needs an explicit `if prev_end "
    "< len(...)`)"
)


class DropsTrailingText(Processor):
    def expand(self, prompt: Sequence[int], images: Sequence[ImageInput]) -> ExpandedPrompt:
        out = super().expand(prompt, images)
        if not out.ranges:
            return out
        # BUG: the expansion stops at the end of the last image
        return ExpandedPrompt(out.token_ids[: out.ranges[-1].end], out.ranges)


ADAPTER = Adapter(name="zoo.exp_drops_text_after_last_image", processor=DropsTrailingText)

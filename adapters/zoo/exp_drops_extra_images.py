"""Images beyond the number of markers are silently dropped, not rejected (EXP-4)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.processor import Processor
from spec.adapter import Adapter
from spec.types import ExpandedPrompt, ImageInput

BREAKS = "EXP-4"
KILLED_BY = "exp_marker_mismatch_rejected"
ORIGIN = "typical student error: `zip(markers, images)` silently truncates to the shorter list"


class DropsExtraImages(Processor):
    def expand(self, prompt: Sequence[int], images: Sequence[ImageInput]) -> ExpandedPrompt:
        markers = sum(1 for token in prompt if token == self._config.marker_id)
        return super().expand(prompt, list(images)[:markers])  # BUG: silent truncation


ADAPTER = Adapter(name="zoo.exp_drops_extra_images", processor=DropsExtraImages)

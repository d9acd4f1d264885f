"""Row-break grids use floor instead of ceil: the last partial row and column of
patches are lost (EXP-10)."""

from __future__ import annotations

import math

from reference.policies import check_image, image_height_width, rowbreak_tokens
from reference.processor import Processor
from spec.adapter import Adapter
from spec.types import RowBreakPolicy

BREAKS = "EXP-10"
KILLED_BY = "exp_rowbreak_policy"
ORIGIN = (
    "typical student error: `//` where Pixtral needs ceiling division for the last partial "
    "patch row and column"
)


class PixtralFloor(Processor):
    def _image_tokens(
        self, image: object, index: int | None = None
    ) -> tuple[tuple[int, ...], tuple[bool, ...] | None]:
        policy, config = self._config.policy, self._config
        if not isinstance(policy, RowBreakPolicy):
            return super()._image_tokens(image, index)
        h, w = image_height_width(check_image(image), policy.name)
        ratio = max(h / policy.max_image_size, w / policy.max_image_size, 1)
        h, w = max(1, math.floor(h / ratio)), max(1, math.floor(w / ratio))
        rows, cols = max(1, h // policy.patch_size), max(1, w // policy.patch_size)  # BUG
        return rowbreak_tokens(rows, cols, config.placeholder_id, config.break_id, config.end_id)


ADAPTER = Adapter(name="zoo.exp_pixtral_floor", processor=PixtralFloor)

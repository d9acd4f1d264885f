"""The toy policy uses ceil(n / 64) instead of n // 64 + 1: one token short on every
multiple of 64 bytes (EXP-6)."""

from __future__ import annotations

import math

from reference.policies import check_image, image_num_bytes
from reference.processor import Processor
from spec.adapter import Adapter
from spec.types import ToyPolicy

BREAKS = "EXP-6"
KILLED_BY = "exp_toy_policy"
ORIGIN = (
    "typical student error: `ceil(n / 64)` for the seed 000 toy rule `n // 64 + 1` (they "
    "differ exactly on multiples of 64)"
)


class ToyCeil(Processor):
    def _image_tokens(
        self, image: object, index: int | None = None
    ) -> tuple[tuple[int, ...], tuple[bool, ...] | None]:
        if not isinstance(self._config.policy, ToyPolicy):
            return super()._image_tokens(image, index)
        n = math.ceil(image_num_bytes(check_image(image)) / 64)  # BUG: not n // 64 + 1
        return (self._config.placeholder_id,) * max(n, 1), None


ADAPTER = Adapter(name="zoo.exp_toy_ceil", processor=ToyCeil)

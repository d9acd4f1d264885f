"""InternVL tiling keeps the first (smallest) grid on an aspect-ratio tie, even when the
image has the area for the larger one (EXP-9)."""

from __future__ import annotations

from reference.policies import (
    check_image,
    image_height_width,
    internvl_target_ratios,
    tokens_per_tile,
)
from reference.processor import Processor
from spec.adapter import Adapter
from spec.types import TiledPolicy

BREAKS = "EXP-9"
KILLED_BY = "exp_tiled_policy"
ORIGIN = (
    "seed 004 DynamicResolutionPreprocessor.find_best_grid: strict `<` keeps the first grid "
    "on a tie (InternVL breaks ties by area)"
)


class TieKeepsSmaller(Processor):
    def _image_tokens(
        self, image: object, index: int | None = None
    ) -> tuple[tuple[int, ...], tuple[bool, ...] | None]:
        policy = self._config.policy
        if not isinstance(policy, TiledPolicy):
            return super()._image_tokens(image, index)
        h, w = image_height_width(check_image(image), policy.name)
        ratios = internvl_target_ratios(policy.min_tiles, policy.max_tiles)
        cols, rows = min(ratios, key=lambda r: abs(w / h - r[0] / r[1]))  # BUG: first wins
        tiles = cols * rows + (1 if policy.use_thumbnail and cols * rows > 1 else 0)
        return (self._config.placeholder_id,) * (tiles * tokens_per_tile(policy)), None


ADAPTER = Adapter(name="zoo.exp_tiled_tie_keeps_smaller", processor=TieKeepsSmaller)

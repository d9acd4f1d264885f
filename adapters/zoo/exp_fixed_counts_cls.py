"""The fixed policy counts the vision tower's CLS token: 577 tokens for LLaVA-1.5's 576
(EXP-7)."""

from __future__ import annotations

from reference.processor import Processor
from spec.adapter import Adapter
from spec.types import FixedPolicy

BREAKS = "EXP-7"
KILLED_BY = "exp_fixed_policy"
ORIGIN = (
    "typical student error: LLaVA-1.5's (336/14)**2 + 1 = 577, counting the CLIP CLS token "
    "the projector drops"
)


class FixedCountsCls(Processor):
    def _image_tokens(
        self, image: object, index: int | None = None
    ) -> tuple[tuple[int, ...], tuple[bool, ...] | None]:
        tokens, is_embed = super()._image_tokens(image, index)
        if isinstance(self._config.policy, FixedPolicy):
            tokens = tokens + (self._config.placeholder_id,)  # BUG: num_tokens + 1
        return tokens, is_embed


ADAPTER = Adapter(name="zoo.exp_fixed_counts_cls", processor=FixedCountsCls)

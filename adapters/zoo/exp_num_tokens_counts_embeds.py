"""num_image_tokens returns the embedding count, not the range length (breaks and end
token left out) for row-break images (EXP-5)."""

from __future__ import annotations

from reference.processor import Processor
from spec.adapter import Adapter
from spec.types import ImageInput

BREAKS = "EXP-5"
KILLED_BY = "exp_range_matches_policy"
ORIGIN = (
    "typical student error: Pixtral row-break ranges sized by the embedding count, "
    "forgetting the break and end tokens"
)


class CountsEmbeds(Processor):
    def num_image_tokens(self, image: ImageInput) -> int:
        tokens, is_embed = self._image_tokens(image)
        return len(tokens) if is_embed is None else sum(is_embed)  # BUG: tokens != embeds


ADAPTER = Adapter(name="zoo.exp_num_tokens_counts_embeds", processor=CountsEmbeds)

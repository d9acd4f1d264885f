"""Extra keys identify an image by its embedding count, not its mm_hash (PFX-4)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.prefix import BlockHasher
from spec.adapter import Adapter
from spec.types import MultiModalItem


class KeyBySizeBlockHasher(BlockHasher):
    def block_extra_keys(
        self, items: Sequence[MultiModalItem], start_token_idx: int, end_token_idx: int
    ) -> tuple[tuple[str, int], ...]:
        # BUG: two images of the same size get the same key
        sized = [MultiModalItem(f"{i.num_embeds} embeds", i.mm_position) for i in items]
        return super().block_extra_keys(sized, start_token_idx, end_token_idx)


BREAKS = "PFX-4"
KILLED_BY = "pfx_different_image_diverges_at_first_touching_block"
ORIGIN = (
    "typical student error: extra keys built from the placeholder length, which equal-size "
    "images share"
)
ADAPTER = Adapter(name="zoo.pfx_key_by_size", block_hasher=KeyBySizeBlockHasher)

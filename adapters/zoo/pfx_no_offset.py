"""Extra keys carry the mm_hash without the offset relative to the block (PFX-6)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.prefix import BlockHasher
from spec.adapter import Adapter
from spec.types import MultiModalItem


class NoOffsetBlockHasher(BlockHasher):
    def block_extra_keys(
        self, items: Sequence[MultiModalItem], start_token_idx: int, end_token_idx: int
    ) -> tuple[tuple[str, int], ...]:
        keys = super().block_extra_keys(items, start_token_idx, end_token_idx)
        return tuple((mm_hash, 0) for mm_hash, _ in keys)  # BUG: placement is forgotten


BREAKS = "PFX-6"
KILLED_BY = "pfx_moving_image_changes_hashes"
ORIGIN = (
    "typical student error: extra keys carry the mm_hash alone, so an image shifted inside a "
    "block hashes the same"
)
ADAPTER = Adapter(name="zoo.pfx_no_offset", block_hasher=NoOffsetBlockHasher)

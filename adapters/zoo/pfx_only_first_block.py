"""Only the block containing an item's offset gets its extra key (PFX-3)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.prefix import BlockHasher
from spec.adapter import Adapter
from spec.types import MultiModalItem


class OnlyFirstBlockHasher(BlockHasher):
    def block_extra_keys(
        self, items: Sequence[MultiModalItem], start_token_idx: int, end_token_idx: int
    ) -> tuple[tuple[str, int], ...]:
        keys = super().block_extra_keys(items, start_token_idx, end_token_idx)
        # BUG: an item that began in an earlier block (negative relative offset) is dropped
        return tuple((mm_hash, rel) for mm_hash, rel in keys if rel >= 0)


BREAKS = "PFX-3"
KILLED_BY = "pfx_extra_keys_exact"
ORIGIN = (
    "typical student error: the item's key added to the block holding its offset only, not "
    "to every block it spans"
)
ADAPTER = Adapter(name="zoo.pfx_only_first_block", block_hasher=OnlyFirstBlockHasher)

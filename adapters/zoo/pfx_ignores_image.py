"""Omits the multimodal extra keys, so prefix hashes ignore the image (PFX-5)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.prefix import BlockHasher
from spec.adapter import Adapter
from spec.types import MultiModalItem


class IgnoresImageBlockHasher(BlockHasher):
    def block_extra_keys(
        self, items: Sequence[MultiModalItem], start_token_idx: int, end_token_idx: int
    ) -> tuple[tuple[str, int], ...]:
        return ()  # BUG: blocks are keyed by their (dummy) token ids alone


BREAKS = "PFX-5"
KILLED_BY = "pfx_no_cross_image_aliasing"
ORIGIN = (
    "typical student error: text-only prefix caching reused for multimodal prompts "
    "(placeholders are identical dummy ids)"
)
ADAPTER = Adapter(name="zoo.pfx_ignores_image", block_hasher=IgnoresImageBlockHasher)

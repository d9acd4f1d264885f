"""Extra keys identify an image by its Python object, not its content (PFX-2)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.prefix import BlockHasher
from spec.adapter import Adapter
from spec.types import MultiModalItem


class KeyByIdentityBlockHasher(BlockHasher):
    def block_extra_keys(
        self, items: Sequence[MultiModalItem], start_token_idx: int, end_token_idx: int
    ) -> tuple[tuple[str, int], ...]:
        # BUG: id() differs between equal items of two requests
        named = [MultiModalItem(f"object {id(i)}", i.mm_position) for i in items]
        return super().block_extra_keys(named, start_token_idx, end_token_idx)


BREAKS = "PFX-2"
KILLED_BY = "pfx_same_inputs_same_hashes"
ORIGIN = (
    "typical student error: extra keys built from the item object (`id(item)`) instead of "
    "its mm_hash"
)
ADAPTER = Adapter(name="zoo.pfx_key_by_identity", block_hasher=KeyByIdentityBlockHasher)

"""The chained block key keeps 24 bits of an image's identity; found by search (PFX-5)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from reference.prefix import BlockHasher
from spec.adapter import Adapter
from spec.types import MultiModalItem

KEY_BITS = 24


def narrowed(mm_hash: str) -> str:
    """The first 24 bits of the item's SHA-256: what the buggy key keeps of it."""
    digest = hashlib.sha256(mm_hash.encode("utf-8")).digest()
    return f"{int.from_bytes(digest[:8], 'big') % (1 << KEY_BITS):06x}"


class Key24BitBlockHasher(BlockHasher):
    def request_block_hashes(
        self, token_ids: Sequence[int], items: Sequence[MultiModalItem]
    ) -> list[str]:
        # BUG: the chained hash keys each image by 24 bits of its identity; block_extra_keys
        # (which PFX-3 inspects) still reports the full mm_hash
        keyed = [MultiModalItem(narrowed(i.mm_hash), i.mm_position) for i in items]
        return super().request_block_hashes(token_ids, keyed)


BREAKS = "PFX-5"
KILLED_BY = "pfx_no_aliasing_by_search"
ORIGIN = (
    "SGLang v0.5.22 managers/schedule_batch.py::MultimodalDataItem.set_pad_value keys an "
    "image by hash % 2**30 (docs/sglang.md, S1), here 24 bits: random images never "
    "collide in a run, a birthday search does"
)
ADAPTER = Adapter(name="zoo.pfx_key_24bit", block_hasher=Key24BitBlockHasher)

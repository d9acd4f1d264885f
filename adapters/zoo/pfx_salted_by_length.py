"""Salts every block hash with the prompt's length, so it depends on later blocks (PFX-1)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.prefix import BlockHasher, hash_block_tokens
from spec.adapter import Adapter
from spec.types import MultiModalItem


class SaltedByLengthBlockHasher(BlockHasher):
    def request_block_hashes(
        self, token_ids: Sequence[int], items: Sequence[MultiModalItem]
    ) -> list[str]:
        hashes = super().request_block_hashes(token_ids, items)
        # BUG: a "request salt" that differs between a prompt and its continuation
        return [hash_block_tokens(h, [len(token_ids)], ()) for h in hashes]


BREAKS = "PFX-1"
KILLED_BY = "pfx_chain_prefix_property"
ORIGIN = (
    "typical student error: salting every block hash with a request-level value (the prompt "
    "length), which breaks prefix sharing"
)
ADAPTER = Adapter(name="zoo.pfx_salted_by_length", block_hasher=SaltedByLengthBlockHasher)

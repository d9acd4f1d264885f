"""Prompt embeddings key a block by the block's first row only (PFX-7)."""

from __future__ import annotations

from dataclasses import replace

from reference.prefix import BlockHasher, TaggedKey
from spec.adapter import Adapter
from spec.types import PrefixIdentity


class FirstRowOnlyBlockHasher(BlockHasher):
    def identity_keys(
        self, identity: PrefixIdentity, start_token_idx: int, end_token_idx: int
    ) -> list[TaggedKey]:
        # BUG: the digest covers the block's first row, not all of them (a stride slip)
        if identity.prompt_embeds is not None:
            first_rows = tuple(
                row
                if (i - start_token_idx) % (end_token_idx - start_token_idx) == 0
                else tuple(0.0 for _ in row)
                for i, row in enumerate(identity.prompt_embeds)
            )
            identity = replace(identity, prompt_embeds=first_rows)
        return super().identity_keys(identity, start_token_idx, end_token_idx)


BREAKS = "PFX-7"
KILLED_BY = "pfx_every_identity_kind_keys"
ORIGIN = (
    "typical student error: the prompt-embeddings digest taken over the block's first row "
    "(an index where a slice was meant), so embeddings that differ later in a block share it"
)
ADAPTER = Adapter(name="zoo.pfx_embeds_first_row_only", block_hasher=FirstRowOnlyBlockHasher)

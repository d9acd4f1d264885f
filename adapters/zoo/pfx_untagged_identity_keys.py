"""Every kind of identity keys the block as a bare value, with no tag saying which kind
it is (PFX-8)."""

from __future__ import annotations

from reference.prefix import BlockHasher, TaggedKey
from spec.adapter import Adapter
from spec.types import PrefixIdentity


class UntaggedKeysBlockHasher(BlockHasher):
    def identity_keys(
        self, identity: PrefixIdentity, start_token_idx: int, end_token_idx: int
    ) -> list[TaggedKey]:
        keys = super().identity_keys(identity, start_token_idx, end_token_idx)
        # BUG: the kind's tag is dropped (the adapter keeps its name only, as 0.22.1):
        # a salt "x" keys a block exactly as an adapter named "x" does
        return [("key", key[1]) for key in keys]


BREAKS = "PFX-8"
KILLED_BY = "pfx_no_identity_kind_confusion"
ORIGIN = (
    "vLLM v0.22.1 v1/core/kv_cache_utils.py::generate_block_hash_extra_keys concatenates "
    "the bare LoRA name and the bare cache_salt (v0.33.0 tags each key: docs/findings.md, V15)"
)
ADAPTER = Adapter(name="zoo.pfx_untagged_identity_keys", block_hasher=UntaggedKeysBlockHasher)

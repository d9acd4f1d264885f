"""The adapter keys a block by its name alone, not the weights it names (PFX-7)."""

from __future__ import annotations

from reference.prefix import BlockHasher, TaggedKey
from spec.adapter import Adapter
from spec.types import PrefixIdentity


class LoraNameOnlyBlockHasher(BlockHasher):
    def identity_keys(
        self, identity: PrefixIdentity, start_token_idx: int, end_token_idx: int
    ) -> list[TaggedKey]:
        keys = super().identity_keys(identity, start_token_idx, end_token_idx)
        # BUG: the adapter's path is dropped: a name reloaded from other weights hits
        return [("lora", key[1]) if key[0] == "lora" else key for key in keys]


BREAKS = "PFX-7"
KILLED_BY = "pfx_every_identity_kind_keys"
ORIGIN = (
    "vLLM v0.22.1 v1/core/kv_cache_utils.py::_gen_lora_extra_hash_keys returns "
    "[lora_request.lora_name] (v0.33.0 adds lora_path: docs/findings.md, V16)"
)
ADAPTER = Adapter(name="zoo.pfx_lora_name_only", block_hasher=LoraNameOnlyBlockHasher)

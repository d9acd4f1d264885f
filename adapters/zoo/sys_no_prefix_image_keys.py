"""Hashes prefix-cache blocks from token ids alone, so a request with other pixels
reuses KV computed from another image (SYS-6)."""

from __future__ import annotations

from collections.abc import Sequence

from reference.engine import EngineLoop
from spec.adapter import Adapter
from spec.types import EngineRequest

BREAKS = "SYS-6"
KILLED_BY = "EngineMachine"
ORIGIN = (
    "typical student error: the text-only prefix cache (block hashes of token ids) reused "
    "for multimodal prompts"
)


class NoPrefixImageKeys(EngineLoop):
    def _block_hashes(self, request: EngineRequest, outputs: Sequence[int]) -> list[str]:
        if not self._config.enable_prefix_caching:
            return []
        tokens = (*request.token_ids, *outputs)
        # BUG: the items are left out, so placeholder blocks of any image hash alike
        return list(self._block_hasher.request_block_hashes(tokens, ()))


ADAPTER = Adapter(name="zoo.sys_no_prefix_image_keys", engine_loop=NoPrefixImageKeys)

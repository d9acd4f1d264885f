"""``update_weights()`` preempts the running requests and resets the prefix cache but not
the encoder cache: an image cached before the update is served at the old weights
(SYS-12)."""

from __future__ import annotations

from reference.engine import EngineLoop
from spec.adapter import Adapter

BREAKS = "SYS-12"
KILLED_BY = "EngineResetMachine"
ORIGIN = (
    "typical student error: the weight sync RL frameworks shipped before they knew of "
    "the encoder cache (TRL #7198, verl #6523: reset_prefix_cache() only), which serves "
    "vision embeddings computed with the old weights"
)


class UpdateKeepsEncoderCache(EngineLoop):
    def update_weights(self) -> None:
        while self._running:
            self._preempt(self._running.pop())
        self.reset_prefix_cache()
        # BUG: no reset_encoder_cache()
        self._weights_version += 1


ADAPTER = Adapter(
    name="zoo.sys_update_keeps_encoder_cache", engine_loop=UpdateKeepsEncoderCache
)

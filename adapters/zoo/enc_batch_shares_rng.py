"""A batch draws every item from one generator seeded by its first item: an image's
embeddings depend on its batch neighbours (ENC-4)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from reference.encoder import Encoder
from reference.hasher import serialize
from spec.adapter import Adapter
from spec.types import ImageInput

BREAKS = "ENC-4"
KILLED_BY = "enc_batch_equals_single"
ORIGIN = (
    "typical student error: one numpy Generator per batch, seeded by the first item, instead "
    "of one per item"
)


class SharedRng(Encoder):
    _rng: np.random.Generator | None = None

    def encode_batch(self, items: Sequence[tuple[ImageInput, int]]) -> list[NDArray[Any]]:
        self._rng = None
        return super().encode_batch(items)

    def _encode_one(self, image: ImageInput, num_embeds: int) -> NDArray[Any]:
        if self._rng is None:  # BUG: one generator for the whole batch
            seed = int.from_bytes(hashlib.sha256(serialize(image)).digest(), "big")
            self._rng = np.random.default_rng(seed)
        return self._rng.standard_normal((num_embeds, self.hidden_size), dtype=np.float32)


ADAPTER = Adapter(name="zoo.enc_batch_shares_rng", encoder=SharedRng)

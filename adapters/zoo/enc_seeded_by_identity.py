"""The encoder seeds its generator from id(image): equal content in another object gets
other embeddings (ENC-2)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from reference.encoder import Encoder
from spec.adapter import Adapter
from spec.types import ImageInput

BREAKS = "ENC-2"
KILLED_BY = "enc_deterministic_by_content"
ORIGIN = (
    "typical student error: `np.random.default_rng(id(image))`, seeding from the object "
    "instead of its content hash"
)


class IdentitySeeded(Encoder):
    def _encode_one(self, image: ImageInput, num_embeds: int) -> NDArray[Any]:
        rng = np.random.default_rng([id(image), num_embeds])  # BUG: identity, not content
        return rng.standard_normal((num_embeds, self.hidden_size), dtype=np.float32)


ADAPTER = Adapter(name="zoo.enc_seeded_by_identity", encoder=IdentitySeeded)

"""The encoder returns float64 embeddings (numpy's default), not float32 (ENC-1)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from reference.encoder import Encoder
from spec.adapter import Adapter
from spec.types import ImageInput

BREAKS = "ENC-1"
KILLED_BY = "enc_output_shape"
ORIGIN = (
    "typical student error: numpy's default dtype (`rng.standard_normal(...)` is float64) "
    "left uncast"
)


class Float64Encoder(Encoder):
    def _encode_one(self, image: ImageInput, num_embeds: int) -> NDArray[Any]:
        return super()._encode_one(image, num_embeds).astype(np.float64)  # BUG: dtype


ADAPTER = Adapter(name="zoo.enc_float64", encoder=Float64Encoder)

"""A zero-size image becomes one placeholder instead of an InvalidInputError (EXP-4)."""

from __future__ import annotations

import numpy as np

from reference.processor import Processor
from spec.adapter import Adapter

BREAKS = "EXP-4"
KILLED_BY = "exp_bad_input_rejected"
ORIGIN = (
    "typical student error: the seed 000 toy rule `len(b) // 64 + 1` gives an empty image "
    "one token, so nothing rejects it"
)


class AcceptsEmptyImage(Processor):
    def _image_tokens(
        self, image: object, index: int | None = None
    ) -> tuple[tuple[int, ...], tuple[bool, ...] | None]:
        if (isinstance(image, bytes) and not image) or (
            isinstance(image, np.ndarray) and image.size == 0
        ):
            return (self._config.placeholder_id,), None  # BUG: empty images pass
        return super()._image_tokens(image, index)


ADAPTER = Adapter(name="zoo.exp_accepts_empty_image", processor=AcceptsEmptyImage)

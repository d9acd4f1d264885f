"""The toy encoder (ENC-1..4): the "expensive" vision tower the encoder cache saves.

Its output is noise, but reproducible noise: a numpy ``default_rng`` seeded from the
sha256 of the image's framed content (``reference.hasher.serialize``: bytes, or array
data with dtype and shape) and ``num_embeds``. Equal content gives bitwise-equal
embeddings in any object, on any call, alone or in a batch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from reference.hasher import frame, serialize
from reference.policies import check_image
from spec.errors import InvalidInputError
from spec.types import ImageInput


def _check_num_embeds(num_embeds: object) -> int:
    if isinstance(num_embeds, (bool, np.bool_)) or not isinstance(num_embeds, (int, np.integer)):
        raise InvalidInputError(f"num_embeds must be an int, got {type(num_embeds).__name__}")
    if num_embeds < 1:
        raise InvalidInputError(f"num_embeds must be >= 1, got {num_embeds}")
    return int(num_embeds)


class Encoder:
    """Deterministic toy encoder counting its invocations (``spec.components.Encoder``)."""

    def __init__(self, hidden_size: int) -> None:
        if isinstance(hidden_size, bool) or not isinstance(hidden_size, int):
            raise InvalidInputError(f"hidden_size must be an int, got {type(hidden_size).__name__}")
        if hidden_size < 1:
            raise InvalidInputError(f"hidden_size must be >= 1, got {hidden_size}")
        self._hidden_size = hidden_size
        self._num_calls = 0

    @property
    def hidden_size(self) -> int:
        return self._hidden_size

    @property
    def num_calls(self) -> int:
        """Items encoded since construction; a batch of k counts k (ENC-3)."""
        return self._num_calls

    def encode(self, image: ImageInput, num_embeds: int) -> NDArray[Any]:
        """A ``(num_embeds, hidden_size)`` float32 array, a pure function of the image's
        content and ``num_embeds`` (ENC-1, ENC-2)."""
        [output] = self.encode_batch([(image, num_embeds)])
        return output

    def encode_batch(self, items: Sequence[tuple[ImageInput, int]]) -> list[NDArray[Any]]:
        """Each item encoded alone, in order (ENC-4). Every item is validated before any
        is encoded, so a bad item leaves ``num_calls`` unchanged."""
        if not isinstance(items, (list, tuple)):
            raise InvalidInputError(
                f"items must be a list of (image, num_embeds) pairs, got {type(items).__name__}"
            )
        checked: list[tuple[ImageInput, int]] = []
        for index, item in enumerate(items):
            if not isinstance(item, tuple) or len(item) != 2:
                raise InvalidInputError(f"item {index} must be an (image, num_embeds) pair")
            try:
                checked.append((check_image(item[0]), _check_num_embeds(item[1])))
            except InvalidInputError as e:
                raise InvalidInputError(f"item {index}: {e}") from None
        outputs = [self._encode_one(image, num_embeds) for image, num_embeds in checked]
        self._num_calls += len(outputs)
        return outputs

    def _encode_one(self, image: ImageInput, num_embeds: int) -> NDArray[Any]:
        content = frame(b"E", serialize(image) + serialize(num_embeds))
        seed = int.from_bytes(hashlib.sha256(content).digest(), "big")
        rng = np.random.default_rng(seed)
        return rng.standard_normal((num_embeds, self._hidden_size), dtype=np.float32)

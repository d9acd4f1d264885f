"""Images that carry only their size, so that a symbolic size reaches the arithmetic.

CrossHair follows symbolic ints through Python code, but numpy (C code) realizes them:
building a real ``height × width`` array would turn every symbolic size into one
concrete value per path, and the search into a slow enumeration. The token-count
policies only read an image's *size* — ``len(image)`` for bytes, ``image.shape`` for a
pixel array — so the contracts hand the processor images that are real ``bytes`` /
``numpy.ndarray`` objects (they pass ``check_image``: non-empty, numeric dtype) whose
size attribute reports the case's size. An implementation that reads the pixels
themselves would see one byte or one pixel: none of the token-count policies does.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class LengthOnlyBytes(bytes):
    """One real byte whose ``len`` is the case's ``num_bytes``."""

    num_bytes: int

    def __len__(self) -> int:
        return self.num_bytes


def bytes_image(num_bytes: int) -> bytes:
    """A bytes image of ``num_bytes`` bytes as far as ``len`` can tell."""
    image = LengthOnlyBytes(b"\x00")
    image.num_bytes = num_bytes
    return image


class ShapeOnlyArray(np.ndarray[Any, np.dtype[np.uint8]]):
    """A 1×1 uint8 array whose ``shape`` is the case's ``(height, width)``."""

    hw: tuple[int, int] = (1, 1)

    @property  # type: ignore[misc]  # read-only on purpose: the case fixes the shape
    def shape(self) -> tuple[int, int]:
        return self.hw


def array_image(height: int, width: int) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """A ``height × width`` grey image as far as ``image.shape`` can tell."""
    image = np.zeros((1, 1), dtype=np.uint8).view(ShapeOnlyArray)
    image.hw = (height, width)
    return image

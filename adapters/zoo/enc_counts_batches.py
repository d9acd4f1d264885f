"""num_calls counts batches, not encoded items (ENC-3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numpy.typing import NDArray

from reference.encoder import Encoder
from spec.adapter import Adapter
from spec.types import ImageInput

BREAKS = "ENC-3"
KILLED_BY = "enc_counts_calls"
ORIGIN = "typical student error: `num_calls += 1` per encode_batch call instead of per encoded item"


class CountsBatches(Encoder):
    def encode_batch(self, items: Sequence[tuple[ImageInput, int]]) -> list[NDArray[Any]]:
        outputs = super().encode_batch(items)
        self._num_calls += 1 - len(outputs)  # BUG: one per batch
        return outputs


ADAPTER = Adapter(name="zoo.enc_counts_batches", encoder=CountsBatches)

"""The splice casts float64 embeddings with torch's .to(), which rounds through float32 (DIFF-1)."""

from __future__ import annotations

import torch

from adapters.torch.splice import TorchSplice, splice_
from spec.adapter import Adapter

BREAKS = "DIFF-1"
KILLED_BY = "diff_splice_matches_oracle"
ORIGIN = (
    "library semantics: a float64 tensor's `.to(float16)` rounds twice, through float32, "
    "where the reference casts once"
)


class DoubleRoundingSplice(TorchSplice):
    def _merge_tensors(
        self, inputs: torch.Tensor, embeddings: list[torch.Tensor], mask: torch.Tensor
    ) -> torch.Tensor:
        # BUG: float64 -> float16/bfloat16 rounds twice (through float32)
        return splice_(inputs, [e.to(inputs.dtype) for e in embeddings], mask)


ADAPTER = Adapter(name="zoo.torch_double_rounding", splice=DoubleRoundingSplice)

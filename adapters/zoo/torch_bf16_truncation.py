"""Injection casts image rows to bfloat16 by dropping the low 16 bits, not rounding (DIFF-2)."""

from __future__ import annotations

import torch

from adapters.torch.splice import TorchSplice, inject
from spec.adapter import Adapter

BREAKS = "DIFF-2"
KILLED_BY = "diff_injection_matches_oracle"
ORIGIN = (
    "typical student error: bf16 made by dropping the low 16 bits of float32 instead of "
    "rounding to nearest even"
)


def truncate_to_bfloat16(tensor: torch.Tensor) -> torch.Tensor:
    bits = tensor.to(torch.float32).view(torch.int32)
    return (bits >> 16).to(torch.int16).view(torch.bfloat16)  # BUG: truncation, not RNE


class TruncatingInjection(TorchSplice):
    def _inject_tensors(
        self, ids: torch.Tensor, text: torch.Tensor, images: list[torch.Tensor], marker_id: int
    ) -> torch.Tensor:
        if text.dtype == torch.bfloat16:
            images = [truncate_to_bfloat16(image) for image in images]
        return inject(ids, text, images, marker_id)


ADAPTER = Adapter(name="zoo.torch_bf16_truncation", splice=TruncatingInjection)

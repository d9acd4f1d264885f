"""Dense layers are one GEMM over the whole batch: rows depend on the neighbours (DIFF-4)."""

from __future__ import annotations

import torch

from adapters.torch.encoder import TinyVit, TorchEncoder
from spec.adapter import Adapter

BREAKS = "DIFF-4"
KILLED_BY = "diff_encode_batch_invariant"
ORIGIN = (
    "library semantics: one batched torch GEMM over all images, whose reduction order (and "
    "so its rounding) depends on the batch"
)


def gemm_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return x @ weight + bias  # BUG: the GEMM's summation order depends on the row count


class GemmVit(TinyVit):
    linear = staticmethod(gemm_linear)


class GemmEncoder(TorchEncoder):
    model_class = GemmVit


ADAPTER = Adapter(name="zoo.torch_batched_gemm", encoder=GemmEncoder)

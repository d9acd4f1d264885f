"""The splice leaves the count check to torch and passes on torch's message (DIFF-3)."""

from __future__ import annotations

import torch

from adapters.torch.splice import TorchSplice
from spec.adapter import Adapter
from spec.errors import SpliceCountError

BREAKS = "DIFF-3"
KILLED_BY = "diff_splice_error_matches_oracle"
ORIGIN = (
    "typical student error: leaving the count check to torch's index_put, whose "
    "shape-mismatch message names no items"
)


class LibraryErrorSplice(TorchSplice):
    def _merge_tensors(
        self, inputs: torch.Tensor, embeddings: list[torch.Tensor], mask: torch.Tensor
    ) -> torch.Tensor:
        try:
            flat = torch.cat([e.to(inputs.dtype) for e in embeddings])
            inputs[mask] = flat  # BUG: no count check (one row broadcasts), torch's message
        except RuntimeError as e:
            raise SpliceCountError(str(e)) from e
        return inputs


ADAPTER = Adapter(name="zoo.torch_library_error", splice=LibraryErrorSplice)

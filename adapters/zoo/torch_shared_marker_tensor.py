"""Injection reuses one embedding tensor for every marker, seed 004's TokenInjector (SPL-5)."""

from __future__ import annotations

import torch

from adapters.torch.splice import TorchSplice, inject
from spec.adapter import Adapter

BREAKS = "SPL-5"
KILLED_BY = "spl_injection_commutes"
ORIGIN = "seed 004 TokenInjector.inject: one visual_tokens tensor reused for every marker"


class SharedMarkerTensor(TorchSplice):
    def _inject_tensors(
        self, ids: torch.Tensor, text: torch.Tensor, images: list[torch.Tensor], marker_id: int
    ) -> torch.Tensor:
        shared = [images[0]] * len(images) if images else []  # BUG: one tensor, every marker
        return inject(ids, text, shared, marker_id)


ADAPTER = Adapter(name="zoo.torch_shared_marker_tensor", splice=SharedMarkerTensor)

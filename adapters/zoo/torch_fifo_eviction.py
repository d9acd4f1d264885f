"""The worker evicts its oldest tensor by entry count, seed 004's VisionEncoderCache (WRK-2)."""

from __future__ import annotations

import torch

from adapters.torch.worker import TorchWorkerStore
from spec.adapter import Adapter

BREAKS = "WRK-2"
KILLED_BY = "wrk_freed_hash_dropped"
ORIGIN = (
    "seed 004 VisionEncoderCache: the worker evicts its oldest tensor by entry count on its "
    "own"
)

#: The article's ``max_cache_size=100``, shrunk so that the properties' programs reach it.
MAX_ENTRIES = 2


class FifoEvictingStore(TorchWorkerStore):
    def _store(self, mm_hash: str, tensor: torch.Tensor) -> None:
        if mm_hash not in self._tensors and len(self._tensors) >= MAX_ENTRIES:
            # BUG: evicts on its own, oldest entry first, counting entries, instead of
            # dropping what the scheduler's encoder cache manager reports freed
            del self._tensors[next(iter(self._tensors))]
        self._tensors[mm_hash] = tensor


ADAPTER = Adapter(name="zoo.torch_fifo_eviction", worker_store=FifoEvictingStore)

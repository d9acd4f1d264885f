"""Batched encodes come back in a thread pool's completion order, as seed 004 collects (ENC-4)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from numpy.typing import NDArray

from adapters.torch.encoder import TorchEncoder
from spec.adapter import Adapter
from spec.types import ImageInput

BREAKS = "ENC-4"
KILLED_BY = "enc_batch_equals_single"
ORIGIN = (
    "seed 004 AsyncImagePipeline.collect: results read with `as_completed`, in completion "
    "order"
)


class OutOfOrderEncoder(TorchEncoder):
    def encode_batch_as(
        self, items: Sequence[tuple[ImageInput, int]], precision: str
    ) -> list[NDArray[Any]]:
        items = list(items)
        # Each worker waits for the one submitted after it, so the last submitted
        # finishes first: a fixed stand-in for a pool's timing, so failures replay.
        done = [threading.Event() for _ in items]
        finished: list[NDArray[Any]] = []
        lock = threading.Lock()

        def work(index: int) -> None:
            try:
                if index + 1 < len(items):
                    done[index + 1].wait()
                [output] = super(OutOfOrderEncoder, self).encode_batch_as(
                    [items[index]], precision
                )
                with lock:
                    finished.append(output)  # BUG: completion order, as as_completed gives
            finally:
                done[index].set()

        with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
            futures = [pool.submit(work, i) for i in range(len(items))]
        for future in futures:
            future.result()
        return finished


ADAPTER = Adapter(name="zoo.torch_out_of_order_batch", encoder=OutOfOrderEncoder)

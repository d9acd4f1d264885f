"""Benchmark of the torch adapter (a target, not a timed test): ``make bench-torch``.

1. **The splice** at up to 16k placeholder rows x 4096 hidden, bfloat16 and float32:
   torch's throughput (``adapters.torch.splice.splice_``, the in-place masked assignment
   on the device), the reference's (``reference.splice.Splice.merge``, numpy on the
   host; bfloat16 as its uint16 bit patterns, which is the same data movement), their
   ratio, and — in the same run — a device-to-device copy of the same bytes as the
   ceiling. Throughput counts the bytes a splice cannot avoid moving: the embedding rows
   read once and written once (``2 x rows x hidden x itemsize``), for all three.
2. **Cache hit vs re-encode**: serving an item's embeddings from the worker store (one
   gather, device to host) against encoding the item again, with the encoder
   configuration fixed (``VitConfig()``, 576 rows, hidden 4096, float32).

Timing: the median of ``--repeats`` runs (at least 10) after warm-up; on a GPU with
CUDA events around each run and a synchronisation before reading them, on the CPU with
``time.perf_counter``. Runs from the checkout with any Python that has torch and numpy
(no Hypothesis, no project virtual environment): ``python3 benchmarks/splice_bench.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from adapters.torch.device import DEVICE, to_bits  # noqa: E402
from adapters.torch.encoder import TorchEncoder, VitConfig  # noqa: E402
from adapters.torch.splice import splice_  # noqa: E402
from adapters.torch.worker import TorchWorkerStore  # noqa: E402
from reference.splice import Splice as ReferenceSplice  # noqa: E402
from spec.types import GatherSpec, PlaceholderRange, WorkerStep  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
#: Text rows around the placeholders (a prompt's words; they are never touched).
TEXT_ROWS = 512
#: Placeholder rows per image item (the splice concatenates the items first).
ITEM_ROWS = 1024


def timed(run: Callable[[], object], repeats: int, device: torch.device) -> float:
    """Median seconds of ``repeats`` runs after two warm-up runs."""
    for _ in range(2):
        run()
    times: list[float] = []
    if device.type == "cuda":
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start.record()
            run()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    else:
        for _ in range(repeats):
            began = time.perf_counter()
            run()
            times.append(time.perf_counter() - began)
    return statistics.median(times)


@dataclass(frozen=True)
class SpliceRow:
    dtype: str
    rows: int
    hidden: int
    megabytes: float
    torch_gbps: float
    reference_gbps: float
    ceiling_gbps: float

    @property
    def torch_over_reference(self) -> float:
        return self.torch_gbps / self.reference_gbps

    @property
    def torch_over_ceiling(self) -> float:
        return self.torch_gbps / self.ceiling_gbps


def bench_splice(dtype_name: str, rows: int, hidden: int, repeats: int) -> SpliceRow:
    dtype = DTYPES[dtype_name]
    generator = torch.Generator().manual_seed(0)
    total = rows + TEXT_ROWS
    # The placeholders: one block after the first half of the text, as in a prompt.
    mask_cpu = torch.zeros(total, dtype=torch.bool)
    mask_cpu[TEXT_ROWS // 2 : TEXT_ROWS // 2 + rows] = True
    inputs_cpu = torch.randn(total, hidden, generator=generator).to(dtype)
    items_cpu = [
        torch.randn(min(ITEM_ROWS, rows - start), hidden, generator=generator).to(dtype)
        for start in range(0, rows, ITEM_ROWS)
    ]
    moved = 2 * rows * hidden * inputs_cpu.element_size()

    inputs = inputs_cpu.to(DEVICE)
    items = [item.to(DEVICE) for item in items_cpu]
    mask = mask_cpu.to(DEVICE)
    torch_s = timed(lambda: splice_(inputs, items, mask), repeats, DEVICE)

    source = torch.cat(items)
    target = torch.empty_like(source)
    ceiling_s = timed(lambda: target.copy_(source), repeats, DEVICE)

    if dtype == torch.bfloat16:  # numpy has no bfloat16: the same bytes as uint16
        inputs_np = to_bits(inputs_cpu)
        items_np = [to_bits(item) for item in items_cpu]
    else:
        inputs_np = inputs_cpu.numpy()
        items_np = [item.numpy() for item in items_cpu]
    mask_np = mask_cpu.numpy()
    reference = ReferenceSplice()
    reference_s = timed(
        lambda: reference.merge(inputs_np, items_np, mask_np), repeats, torch.device("cpu")
    )
    return SpliceRow(
        dtype=dtype_name,
        rows=rows,
        hidden=hidden,
        megabytes=moved / 1e6,
        torch_gbps=moved / torch_s / 1e9,
        reference_gbps=moved / reference_s / 1e9,
        ceiling_gbps=moved / ceiling_s / 1e9,
    )


@dataclass(frozen=True)
class CacheRow:
    rows: int
    hidden: int
    encode_ms: float
    hit_ms: float

    @property
    def encode_over_hit(self) -> float:
        return self.encode_ms / self.hit_ms


def bench_cache(rows: int, hidden: int, repeats: int) -> CacheRow:
    """One item: served from the worker store (hit) against encoded again (miss)."""
    image = np.arange(64 * 64 * 3, dtype=np.uint8).reshape(64, 64, 3)
    encoder = TorchEncoder(hidden, VitConfig())
    embeds = encoder.encode(image, rows)
    store = TorchWorkerStore()
    position = PlaceholderRange(0, rows)
    store.execute_step(WorkerStep((), {"img": embeds}, ()))
    hit = WorkerStep((), {}, (GatherSpec("r", "img", position, 0, rows),))
    cpu = torch.device("cpu")  # both paths end on the host: wall time is the measure
    hit_s = timed(lambda: store.execute_step(hit), repeats, cpu)
    encode_s = timed(lambda: encoder.encode(image, rows), repeats, cpu)
    return CacheRow(rows, hidden, encode_s * 1e3, hit_s * 1e3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=["bf16", "fp32"])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cache-rows", type=int, default=576)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.repeats < 10:
        parser.error("--repeats must be at least 10 (the figures are medians)")

    threads = torch.get_num_threads()
    print(f"device {DEVICE} ({_device_name()}), torch {torch.__version__}, "
          f"{threads} CPU threads, median of {args.repeats} runs")
    print()
    print("splice: GB/s of embedding rows moved (read + write)")
    header = (f"{'dtype':5} {'rows':>6} {'hidden':>6} {'MB':>8} {'torch':>8} {'ref':>8} "
              f"{'ceiling':>8} {'torch/ref':>9} {'torch/ceil':>10}")
    print(header)
    splice_rows = []
    for dtype_name in args.dtypes:
        for rows in args.rows:
            row = bench_splice(dtype_name, rows, args.hidden, args.repeats)
            splice_rows.append(row)
            print(f"{row.dtype:5} {row.rows:6} {row.hidden:6} {row.megabytes:8.1f} "
                  f"{row.torch_gbps:8.2f} {row.reference_gbps:8.2f} {row.ceiling_gbps:8.2f} "
                  f"{row.torch_over_reference:9.2f} {row.torch_over_ceiling:10.2f}")
    print()
    cache = bench_cache(args.cache_rows, args.hidden, args.repeats)
    print(f"cache hit vs re-encode ({cache.rows} rows x hidden {cache.hidden}, {VitConfig()}):")
    print(f"  re-encode {cache.encode_ms:.3f} ms, hit {cache.hit_ms:.3f} ms, "
          f"re-encode / hit = {cache.encode_over_hit:.1f}")
    if args.json:
        payload: dict[str, Any] = {
            "device": str(DEVICE),
            "torch": torch.__version__,
            "repeats": args.repeats,
            "splice": [
                asdict(r) | {"torch_over_reference": r.torch_over_reference,
                             "torch_over_ceiling": r.torch_over_ceiling}
                for r in splice_rows
            ],
            "cache": asdict(cache) | {"encode_over_hit": cache.encode_over_hit},
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


def _device_name() -> str:
    if DEVICE.type == "cuda":
        return torch.cuda.get_device_name(DEVICE)
    return "CPU"


if __name__ == "__main__":
    raise SystemExit(main())

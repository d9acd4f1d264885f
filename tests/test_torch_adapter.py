"""The torch adapter (adapters/torch/), its zoo entries (adapters/zoo/torch_*) and the
differential oracle (properties/differential.py).

Tests that need torch are skipped when it is not installed (it is the ``torch`` extra);
the import-boundary and unavailability tests run either way. The properties themselves
run against the adapter with ``make verify ADAPTER=adapters/torch``; the zoo entries
are killed by tests/test_zoo.py, which picks them up when torch is installed.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from properties import differential
from spec import components
from spec.types import GatherSpec, PlaceholderRange, WorkerStep

ROOT = Path(__file__).resolve().parents[1]
TORCH_PACKAGE = ROOT / "adapters" / "torch"
TORCH_ZOO = sorted((ROOT / "adapters" / "zoo").glob("torch_*.py"))
HAS_TORCH = importlib.util.find_spec("torch") is not None
NO_TORCH = "torch is not installed: run `make torch` (the torch extra)"
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason=NO_TORCH)


def _python(script: str) -> str:
    """What ``python -c script`` prints in a fresh interpreter on the checkout."""
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout


# --- always ---------------------------------------------------------------------------


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
            names.extend(
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            )
    return names


def test_the_torch_adapter_imports_nothing_from_reference() -> None:
    files = sorted(TORCH_PACKAGE.glob("*.py"))
    assert files, "adapters/torch/ has no modules"
    offending = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in files
        for name in _imported_modules(path)
        if name == "reference" or name.startswith("reference.")
    }
    assert not offending, f"adapters/torch must not import reference/: {sorted(offending)}"


def test_the_import_walker_sees_a_reference_import(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("import numpy\nfrom reference.splice import Splice\n", encoding="utf-8")
    assert "reference.splice" in _imported_modules(planted)


def test_the_differential_properties_do_not_need_torch_or_the_reference() -> None:
    imported = _imported_modules(ROOT / "properties" / "differential.py")
    assert not [n for n in imported if n.split(".")[0] in ("torch", "reference")], imported


def test_without_torch_the_adapter_reports_itself_unavailable_in_one_line() -> None:
    # A None entry in sys.modules makes `import torch` fail as if it were not installed.
    script = (
        "import sys; sys.modules['torch'] = None\n"
        "from harness.loader import AdapterLoadError, load_adapter\n"
        "try:\n"
        "    load_adapter('adapters/torch')\n"
        "except AdapterLoadError as e:\n"
        "    print('\\n'.join(e.problems))\n"
        "try:\n"
        "    import adapters.torch\n"
        "except ModuleNotFoundError as e:\n"
        "    print(type(e).__name__, e.name)\n"
    )
    problem, error = _python(script).splitlines()
    assert "torch adapter unavailable: torch is not installed (make torch)" in problem
    assert error == "TorchUnavailableError torch"


def test_without_torch_the_installed_adapter_says_pip_install_the_extra(tmp_path: Path) -> None:
    # installed (no Makefile beside the package), `make torch` means nothing: the hint
    # names the extra of the distribution (issue 33, item 9)
    installed = tmp_path / "site" / "mmspec" / "adapters" / "torch"
    installed.mkdir(parents=True)
    shutil.copy(ROOT / "adapters" / "torch" / "__init__.py", installed / "__init__.py")
    script = (
        "import sys; sys.modules['torch'] = None\n"
        "from harness.loader import AdapterLoadError, load_adapter\n"
        "try:\n"
        f"    load_adapter({str(installed)!r})\n"
        "except AdapterLoadError as e:\n"
        "    print('\\n'.join(e.problems))\n"
    )
    problem = _python(script).strip()
    assert (
        "torch adapter unavailable: torch is not installed (pip install 'mmspec[torch]')"
        in problem
    ), problem


def test_every_torch_zoo_entry_declares_its_bug() -> None:
    assert len(TORCH_ZOO) >= 7
    for path in TORCH_ZOO:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstring = ast.get_docstring(tree)
        assert docstring and "\n" not in docstring.strip(), f"{path.name}: one-line docstring"
        constants = {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        assert {"BREAKS", "KILLED_BY", "ADAPTER"} <= constants, path.name


# --- the oracle (numpy only) ----------------------------------------------------------


def _exact_nearest_even(value: float, neighbours: list[float]) -> float:
    """The representable value nearest to ``value`` (ties to the one whose last bit is
    even), by exact rational arithmetic — an oracle for the oracle."""
    exact = Fraction(value)
    best = min(neighbours, key=lambda n: abs(Fraction(n) - exact))
    ties = [n for n in neighbours if abs(Fraction(n) - exact) == abs(Fraction(best) - exact)]
    if len(ties) == 1:
        return best
    even = [n for n in ties if int(np.array([n], np.float32).view(np.uint32)[0] >> 16) % 2 == 0]
    return even[0]


def _bfloat16_value(bits: int) -> float:
    return float(np.array([bits << 16], np.uint32).view(np.float32)[0])


def test_the_bfloat16_oracle_rounds_float64_once_to_nearest_even() -> None:
    rng = np.random.default_rng(7)
    values: list[float] = []
    for _ in range(400):
        low = int(rng.integers(0x0080, 0x7F7F))  # positive normal bfloat16 values
        a, b = _bfloat16_value(low), _bfloat16_value(low + 1)
        middle = (a + b) / 2
        values += [middle, np.nextafter(middle, np.inf), np.nextafter(middle, -np.inf)]
        # One float32 ulp above the midpoint is still a tie after a float32 rounding.
        values.append(middle + (b - a) * 2.0**-30)
    got = differential.bfloat16_bits(np.array(values, dtype=np.float64))
    for value, bits in zip(values, got.tolist(), strict=True):
        low = int(np.array([value], np.float32).view(np.uint32)[0] >> 16)
        candidates = [_bfloat16_value(c) for c in (low - 1, low, low + 1, low + 2)]
        assert _bfloat16_value(bits) == _exact_nearest_even(value, candidates), value


def test_the_bfloat16_oracle_overflows_to_infinity_and_keeps_signs() -> None:
    values = np.array([3.4e38, -3.4e38, 1e39, -0.0, 0.0], dtype=np.float64)
    assert differential.bfloat16_bits(values).tolist() == [0x7F80, 0xFF80, 0x7F80, 0x8000, 0]


def test_the_oracle_merge_keeps_text_bits_and_fills_in_order() -> None:
    text = np.array([[0x7E01], [0x0001], [0xFFFF]], dtype=np.uint16)  # NaN payloads
    mask = np.array([False, True, False])
    out = differential.expected_merge_bits(text, [np.array([[1.0]])], mask, "bfloat16")
    assert out.tolist() == [[0x7E01], [0x3F80], [0xFFFF]]


GPU_CHECK = ROOT / "benchmarks" / "gpu_check.sh"


def test_the_gpu_check_script_is_valid_bash() -> None:
    """benchmarks/gpu_check.sh (docs/torch.md, "On a GPU") parses; the whole run is too
    slow for a test (``DEVICE=cpu bash benchmarks/gpu_check.sh``, about three minutes)."""
    assert GPU_CHECK.is_file()
    subprocess.run(["bash", "-n", str(GPU_CHECK)], check=True, capture_output=True)
    text = GPU_CHECK.read_text(encoding="utf-8")
    assert "set -euo pipefail" in text and "MMSPEC_TORCH_DEVICE" in text


def test_the_gpu_check_stops_at_once_without_a_usable_python(tmp_path: Path) -> None:
    result = subprocess.run(
        ["bash", str(GPU_CHECK)],
        cwd=tmp_path,
        env={**os.environ, "PYTHON": str(tmp_path / "no-python"), "GPU_CHECK_OUT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "cannot run the check" in result.stderr
    assert "== verify" not in result.stdout


def test_the_gpu_check_stops_at_once_on_a_hypothesis_built_for_another_python(
    tmp_path: Path,
) -> None:
    """Seen on the H100 (docs/torch.md, "On a GPU"): a Hypothesis brought along for another
    Python is *found* but fails to import its compiled module. The probe imports it, so the
    check stops before verify with the import error, not 0 properties into the run."""
    if not HAS_TORCH:
        pytest.skip(NO_TORCH)
    stand_in = tmp_path / "site" / "hypothesis"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'hypothesis._native'\")\n", encoding="utf-8"
    )
    result = subprocess.run(
        ["bash", str(GPU_CHECK)],
        cwd=tmp_path,
        env={
            **os.environ,
            "DEVICE": "cpu",
            "PYTHONPATH": str(tmp_path / "site"),
            "GPU_CHECK_OUT": str(tmp_path / "out"),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "hypothesis._native" in result.stdout + result.stderr
    assert "== verify" not in result.stdout


# --- torch ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch_modules() -> dict[str, Any]:
    if not HAS_TORCH:
        pytest.skip(NO_TORCH)
    return {
        "torch": importlib.import_module("torch"),
        "device": importlib.import_module("adapters.torch.device"),
        "encoder": importlib.import_module("adapters.torch.encoder"),
        "splice": importlib.import_module("adapters.torch.splice"),
        "worker": importlib.import_module("adapters.torch.worker"),
        "adapter": importlib.import_module("adapters.torch"),
    }


@needs_torch
def test_loading_imports_no_reference_module() -> None:
    script = (
        "from harness.loader import load_adapter\n"
        "import sys\n"
        "load_adapter('adapters/torch')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'reference'))\n"
    )
    assert _python(script).strip() == "[]"


@needs_torch
def test_the_adapter_meets_the_protocols_and_the_extensions(torch_modules: dict[str, Any]) -> None:
    from harness.loader import check_adapter

    adapter = torch_modules["adapter"].ADAPTER
    assert check_adapter(adapter) == []
    assert isinstance(adapter.splice(), components.Bfloat16Splice)
    encoder = adapter.encoder(4)
    assert isinstance(encoder, components.MultiPrecisionEncoder)
    assert encoder.precisions == ("float32", "float16", "bfloat16")


@needs_torch
def test_numerics_are_pinned(torch_modules: dict[str, Any]) -> None:
    torch = torch_modules["torch"]
    assert torch.are_deterministic_algorithms_enabled()
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        assert matmul.fp32_precision == "ieee"
    else:
        assert not matmul.allow_tf32


@needs_torch
def test_casts_from_float64_round_once(torch_modules: dict[str, Any]) -> None:
    torch, device = torch_modules["torch"], torch_modules["device"]
    # 1 + 2^-11 + 2^-40: just above a float16 tie; through float32 it *becomes* the tie.
    value = np.array([1 + 2.0**-11 + 2.0**-40], dtype=np.float64)
    plain = torch.from_numpy(value).to(torch.float16).view(torch.int16).item()
    once = device.cast_rounding_once(torch.from_numpy(value), torch.float16)
    assert once.view(torch.int16).item() == int(value.astype(np.float16).view(np.uint16)[0])
    assert plain != once.view(torch.int16).item(), "torch no longer rounds twice: simplify"
    rng = np.random.default_rng(3)
    wide = rng.standard_normal(20000) * 10.0 ** rng.uniform(-8, 8, 20000)
    to_bf16 = device.cast_rounding_once(torch.from_numpy(wide), torch.bfloat16)
    assert np.array_equal(device.to_bits(to_bf16), differential.bfloat16_bits(wide))
    to_f16 = device.cast_rounding_once(torch.from_numpy(wide), torch.float16)
    with np.errstate(over="ignore"):
        expected = wide.astype(np.float16).view(np.uint16)
    assert np.array_equal(to_f16.numpy().view(np.uint16), expected)


@needs_torch
def test_float32_to_bfloat16_matches_the_oracle(torch_modules: dict[str, Any]) -> None:
    torch, device = torch_modules["torch"], torch_modules["device"]
    bits = np.random.default_rng(5).integers(0, 2**32, 50000, dtype=np.uint64).astype(np.uint32)
    values = bits.view(np.float32)
    values = values[np.isfinite(values)]
    ours = device.to_bits(torch.from_numpy(values).to(torch.bfloat16))
    assert np.array_equal(ours, differential.bfloat16_bits(values))


@needs_torch
def test_the_splice_is_in_place_on_the_device(torch_modules: dict[str, Any]) -> None:
    torch, splice = torch_modules["torch"], torch_modules["splice"]
    device = torch_modules["device"].DEVICE
    inputs = torch.zeros(6, 2, device=device)
    pointer = inputs.data_ptr()
    ranges = [PlaceholderRange(1, 3, (True, False, True)), PlaceholderRange(5, 1)]
    mask = splice.multimodal_mask(6, ranges)
    assert mask.tolist() == [False, True, False, True, False, True]
    rows = [torch.tensor([[1.0, 1.0], [2.0, 2.0]]), torch.tensor([[3.0, 3.0]])]
    out = splice.splice_(inputs, [r.to(device) for r in rows], mask)
    assert out.data_ptr() == pointer
    assert out[:, 0].tolist() == [0.0, 1.0, 0.0, 2.0, 0.0, 3.0]
    with pytest.raises(Exception, match=r"^Attempted to assign 1 = 1 multimodal tokens to 3"):
        splice.splice_(inputs, [rows[1].to(device)], mask)


@needs_torch
def test_injection_equals_expand_then_splice(torch_modules: dict[str, Any]) -> None:
    torch, splice = torch_modules["torch"], torch_modules["splice"]
    marker = 9
    ids = torch.tensor([1, marker, 2, marker, marker])
    text = torch.arange(5.0)[:, None].repeat(1, 2)
    images = [torch.full((2, 2), 10.0), torch.full((1, 2), 20.0), torch.full((3, 2), 30.0)]
    injected = splice.inject(ids, text, images, marker)
    expanded_ids = [1, -1, -1, 2, -1, -1, -1, -1]
    table = {1: 1.0, 2: 2.0, -1: -5.0}
    expanded = torch.tensor([[table[i]] * 2 for i in expanded_ids])
    mask = torch.tensor([i == -1 for i in expanded_ids])
    spliced = splice.splice_(expanded.clone(), images, mask)
    text_rows = injected[[0, 3]]
    assert torch.equal(text_rows, torch.tensor([[0.0, 0.0], [2.0, 2.0]]))
    assert torch.equal(injected[mask], spliced[mask])


@needs_torch
def test_weights_are_seeded_on_the_cpu(torch_modules: dict[str, Any]) -> None:
    encoder = torch_modules["encoder"]
    torch = torch_modules["torch"]
    a, b = encoder.TinyVit(8), encoder.TinyVit(8)
    assert a._cpu_weights.patch_embed[0].device.type == "cpu"
    assert torch.equal(a._cpu_weights.projector_out[0], b._cpu_weights.projector_out[0])
    other = encoder.TinyVit(8, encoder.VitConfig(seed=1))
    assert not torch.equal(a._cpu_weights.patch_embed[0], other._cpu_weights.patch_embed[0])


@needs_torch
@pytest.mark.parametrize("precision", ["float32", "float16", "bfloat16"])
def test_an_item_alone_equals_the_item_in_a_batch(
    torch_modules: dict[str, Any], precision: str
) -> None:
    encoder = torch_modules["encoder"].TorchEncoder(6)
    rng = np.random.default_rng(11)
    items = [(rng.bytes(int(rng.integers(1, 200))), int(n)) for n in (3, 1, 3, 3, 2, 7)]
    batched = encoder.encode_batch_as(items, precision)
    for item, out in zip(items, batched, strict=True):
        alone = encoder.encode_batch_as([item], precision)[0]
        assert alone.dtype == np.float32 and alone.tobytes() == out.tobytes()
    assert encoder.num_calls == 2 * len(items)

    def in_precision(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        if precision == "float16":
            return x.astype(np.float16).astype(np.float32)
        if precision == "bfloat16":
            return (differential.bfloat16_bits(x).astype(np.uint32) << 16).view(np.float32)
        return x

    assert all(np.array_equal(in_precision(o), o) for o in batched), "values of the precision"


@needs_torch
def test_the_worker_holds_device_tensors(torch_modules: dict[str, Any]) -> None:
    worker = torch_modules["worker"]
    store = worker.TorchWorkerStore()
    rows = np.arange(6, dtype=np.float32).reshape(3, 2)
    position = PlaceholderRange(4, 4, (True, False, True, True))
    out = store.execute_step(
        WorkerStep(("never-held",), {"h": rows}, (GatherSpec("r", "h", position, 1, 3),))
    )
    assert store._tensors["h"].device == torch_modules["device"].DEVICE
    assert [o.tolist() for o in out] == [[[2.0, 3.0]]]
    store.execute_step(WorkerStep(("h",), {"h": rows + 1}, ()))  # freed, then re-stored
    assert store.held_hashes() == frozenset({"h"})


@needs_torch
def test_the_torch_zoo_entries_import_with_torch() -> None:
    for path in TORCH_ZOO:
        module = importlib.import_module(f"adapters.zoo.{path.stem}")
        assert module.ADAPTER.name == f"zoo.{path.stem}"


@needs_torch
def test_the_benchmark_runs(tmp_path: Path) -> None:
    report = tmp_path / "bench.json"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "splice_bench.py"),
            "--rows",
            "64",
            "--hidden",
            "32",
            "--repeats",
            "10",
            "--cache-rows",
            "8",
            "--json",
            str(report),
        ],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert "torch/ref" in result.stdout
    import json

    figures = json.loads(report.read_text(encoding="utf-8"))
    assert {r["dtype"] for r in figures["splice"]} == {"bf16", "fp32"}
    assert all(r["torch_gbps"] > 0 and r["ceiling_gbps"] > 0 for r in figures["splice"])
    assert figures["cache"]["encode_over_hit"] > 0


@needs_torch
def test_mmspec_torch_device_puts_the_adapters_tensors_on_the_cpu() -> None:
    """What benchmarks/gpu_check.sh relies on: DEVICE=cpu becomes MMSPEC_TORCH_DEVICE=cpu,
    and every component computes there (a GPU machine included)."""
    script = (
        "import numpy as np\n"
        "import adapters.torch as t\n"
        "from spec.types import WorkerStep\n"
        "store = t.TorchWorkerStore()\n"
        "store.execute_step(WorkerStep((), {'h': np.zeros((2, 3), np.float32)}, ()))\n"
        "print(t.DEVICE, t.ADAPTER.name, store._tensors['h'].device.type,\n"
        "      t.TorchEncoder(4).device_type)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MMSPEC_TORCH_DEVICE": "cpu"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split() == ["cpu", "torch", "(cpu)", "cpu", "cpu"]

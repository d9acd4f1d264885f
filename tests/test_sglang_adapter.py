"""The SGLang adapter runs SGLang's own code, and never calls into the torchvision shim.

Runs in ``.venv-sglang`` (``make .venv-sglang``), whose ``.pth`` installs the shim, against
the tree named by ``MMSPEC_SGLANG_SRC`` or ``.sglang-cache/sglang-0.5.23`` (fetched by
``python adapters/sglang/fetch.py 0.5.23``). Elsewhere these tests skip, except under
``MMSPEC_REQUIRE_SGLANG=1`` (the SGLang CI job), where they fail.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TREE = ROOT / ".sglang-cache" / "sglang-0.5.23"
REQUIRED = os.environ.get("MMSPEC_REQUIRE_SGLANG") == "1"

#: The properties of the components the adapter provides (PFX-3, SPL-5 and DIFF-2 are not
#: provided: optional capabilities SGLang has no code for; nor WRK-1, 2 and 5: the worker
#: store keeps its own cache).
PROVIDED = ("PFX-1", "PFX-2", "PFX-4", "PFX-5", "PFX-6",
            "SPL-1", "SPL-2", "SPL-3", "SPL-4", "DIFF-1", "DIFF-3", "WRK-3", "WRK-4")


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"MMSPEC_REQUIRE_SGLANG=1 but {reason}")
    pytest.skip(f"{reason}: `make verify-sglang-ci` runs these (docs/sglang.md)")


@pytest.fixture(scope="module")
def shim() -> ModuleType:
    try:
        module = importlib.import_module("mmspec_torchvision_shim")
    except ModuleNotFoundError:
        _unavailable("not in .venv-sglang (no torchvision shim)")
    if not module.installed():
        _unavailable("the torchvision shim is importable but not installed")
    return module


@pytest.fixture(scope="module")
def adapter(shim: ModuleType) -> ModuleType:
    tree = os.environ.get("MMSPEC_SGLANG_SRC") or str(DEFAULT_TREE)
    if not Path(tree).is_dir():
        _unavailable(f"no SGLang tree at {tree}")
    os.environ["MMSPEC_SGLANG_SRC"] = tree
    return importlib.import_module("adapters.sglang")


def test_shim_poisons_every_use(shim: ModuleType) -> None:
    """The shim can fire: a use of a fetched name raises and is recorded."""
    before = len(shim.TOUCHES)
    poisoned = shim._Poisoned("torchvision.transforms.Compose")
    with pytest.raises(shim.TorchvisionShimError):
        poisoned([])
    with pytest.raises(shim.TorchvisionShimError):
        poisoned.BICUBIC  # noqa: B018
    assert shim.TOUCHES[before:] == [
        "torchvision.transforms.Compose(...)",
        "torchvision.transforms.Compose.BICUBIC",
    ]
    del shim.TOUCHES[before:]


def test_sglang_imported_the_shim_and_transformers_did_not(
    shim: ModuleType, adapter: ModuleType
) -> None:
    """SGLang's import chain got the shim (internvl_utils' ``T``); transformers, probing
    for an optional backend, found no torchvision."""
    internvl = sys.modules["sglang.srt.multimodal.internvl_utils"]
    assert "torchvision shim" in repr(internvl.InterpolationMode)
    from transformers.utils import import_utils

    assert not import_utils.is_torchvision_available()
    assert "torchvision: import shim" in adapter.ADAPTER.name


def test_code_under_test_never_touches_torchvision(
    shim: ModuleType, adapter: ModuleType
) -> None:
    """Every property of a provided component runs, and not one touch is recorded."""
    from harness.cli import main

    shim.TOUCHES.clear()
    main(["verify", "--adapter", "adapters/sglang", "--profile", "ci", "--only", *PROVIDED])
    assert shim.TOUCHES == []


def test_splice_keeps_the_last_rows_given_too_many(adapter: ModuleType) -> None:
    """S3, on SGLang's code alone: five rows for four positions are not an error; the
    first image loses its first row and every later row moves up one position."""
    import numpy as np

    if adapter.ADAPTER.splice is None:
        pytest.skip("this release has no splice function (0.5.3): nothing to check, nothing to do")
    first = np.array([[1.0], [2.0], [3.0]], dtype=np.float32)
    second = np.array([[4.0], [5.0]], dtype=np.float32)
    out = adapter.ADAPTER.splice().merge(
        np.zeros((4, 1), dtype=np.float32), [first, second], np.ones(4, dtype=bool)
    )
    assert out[:, 0].tolist() == [2.0, 3.0, 4.0, 5.0]


def _row_break_step() -> Any:
    """One image of six positions at offset 3 whose third and fifth take no embedding
    (row breaks), stored and gathered in two windows that cut a run."""
    import numpy as np

    from spec.types import GatherSpec, PlaceholderRange, WorkerStep

    position = PlaceholderRange(3, 6, (True, True, False, True, False, True))
    rows = np.arange(8, dtype=np.float32).reshape(4, 2)
    return WorkerStep((), {"A": rows}, (
        GatherSpec("r", "A", position, 0, 4), GatherSpec("r", "A", position, 4, 6),
    ))


def test_the_worker_stores_gathers_are_sglangs(adapter: ModuleType) -> None:
    """The store's gathers run SGLang's code: the processor's run finder, the cache's
    set and lookup, and mm_schedule's slicing (0.5.3: mm_utils.get_embedding_chunk)."""
    called: set[str] = set()
    tree = os.environ["MMSPEC_SGLANG_SRC"]

    def record(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(tree):
            called.add(frame.f_code.co_name)

    store = adapter.ADAPTER.worker_store()
    sys.setprofile(record)
    try:
        first, second = store.execute_step(_row_break_step())
    finally:
        sys.setprofile(None)
    assert first[:, 0].tolist() == [0.0, 2.0, 4.0] and second[:, 0].tolist() == [6.0]
    assert "get_mm_items_offset" in called, called
    assert "get_embedding_chunk" in called, called  # an item of several runs
    assert {"set", "get_single"} <= called or {"put", "get"} <= called, called


def test_a_broken_slice_in_sglangs_code_fails_wrk_3(
    adapter: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WRK-3 judges SGLang's slicing: with ``get_embedding_chunk`` made to lose the last
    row of a chunk, the property fails (the function is SGLang's; the change is this
    test's, undone after it)."""
    from harness.runner import Verdict, verify

    module = adapter.MM_SCHEDULE if adapter.MM_SCHEDULE is not None else adapter.MM_UTILS
    original = module.get_embedding_chunk

    def loses_a_row(*args: Any, **kwargs: Any) -> Any:
        chunk, start, end = original(*args, **kwargs)
        return chunk[:-1], start, end - 1 if end > start else end

    monkeypatch.setattr(module, "get_embedding_chunk", loses_a_row)
    if adapter.MM_SCHEDULE is not None:  # single-run items: _slice_item_chunk's own slice
        slice_item = module._slice_item_chunk
        monkeypatch.setattr(
            module, "_slice_item_chunk", lambda *a, **k: slice_item(*a, **k)[:-1]
        )
    report = verify("adapters/sglang", "ci", only=["WRK-3"])
    assert [row.verdict for row in report.rows] == [Verdict.FAIL]


#: The releases whose declared verdicts name finding S1 (the 30-bit radix key).
EXPECTED = ROOT / "adapters" / "sglang" / "expected"


def _declares(version: str, finding: str) -> bool:
    import json

    declared = json.loads((EXPECTED / f"{version}.json").read_text(encoding="utf-8"))
    return any(row.get("finding") == finding for row in declared["expected"])


def _run_on_release(script: str, version: str) -> subprocess.CompletedProcess[str]:
    """``adapters/sglang/<script> TREE`` on the pinned release's unpacked tree."""
    tree = ROOT / ".sglang-cache" / f"sglang-{version}"
    if not tree.is_dir():
        _unavailable(f"no SGLang {version} tree at {tree}")
    return subprocess.run(
        [sys.executable, str(ROOT / "adapters" / "sglang" / script), str(tree)],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT,
    )


@pytest.mark.parametrize("version", sorted(p.stem for p in EXPECTED.glob("*.json")))
def test_the_s1_reproducer_runs_on_sglangs_code_alone(shim: ModuleType, version: str) -> None:
    """issue 17: the collision the search found, replayed by a script that imports only
    SGLang (and numpy): exit 1 (image B's whole prompt is cached under image A's) where
    the release is declared to have S1, exit 0 where it is not."""
    done = _run_on_release("repro_pad_collision.py", version)
    collides = _declares(version, "S1")
    assert done.returncode == (1 if collides else 0), done.stdout + done.stderr
    wanted = "has 2 of image B's 2 tokens" if collides else "has 0 of image B's 2 tokens"
    assert wanted in done.stdout, done.stdout


@pytest.mark.parametrize("version", sorted(p.stem for p in EXPECTED.glob("*.json")))
def test_processed_features_that_differ_share_an_identity_in_every_pinned_release(
    shim: ModuleType, version: str
) -> None:
    """Finding S6's reproducer (HASH-10): SGLang's ``hash_feature`` (what
    ``MultimodalDataItem.set_pad_value`` keys an item by when it carries no hash) gives
    one hash, so one pad value, to features that differ only in shape, in dtype, or in
    where a list of tensors is split; the script imports SGLang, torch and numpy only.
    Every pinned release declares S6; a release that tells them apart fails here, and its
    declaration (adapters/sglang/expected/) must then drop S6."""
    done = _run_on_release("repro_feature_hash.py", version)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "3 of 3 pairs of different features share one identity" in done.stdout, done.stdout
    for pair in ("shape (6, 4) vs (4, 6)", "float32 vs its int32 view", "vs [t[:1], t[1:]]"):
        line = next(li for li in done.stdout.splitlines() if pair in li)
        assert line.endswith("ONE IDENTITY"), line


@pytest.mark.parametrize("version", sorted(p.stem for p in EXPECTED.glob("*.json")))
def test_the_s7_reproducer_runs_on_sglangs_code_alone(shim: ModuleType, version: str) -> None:
    """Finding S7 (EMB-2) on SGLang's cache alone: exit 1 (an embedding larger than the
    cache evicted the one held before it was refused) where the release declares S7, exit
    0 where it does not (0.5.23 refuses first)."""
    done = _run_on_release("repro_oversized_evicts.py", version)
    empties = _declares(version, "S7")
    assert done.returncode == (1 if empties else 0), done.stdout + done.stderr
    wanted = "it now holds items []" if empties else "it now holds items [1]"
    assert wanted in done.stdout, done.stdout


@pytest.mark.parametrize("version", sorted(p.stem for p in EXPECTED.glob("*.json")))
def test_the_s8_reproducer_runs_on_sglangs_code_alone(shim: ModuleType, version: str) -> None:
    """Finding S8 (HASH-11) on SGLang's processor path and item alone: exit 1 (image B,
    sent with image A's hash, takes A's hash and pad value) where the release declares
    S8, exit 0 where it does not (0.5.3 reads no caller hash from a dict item)."""
    done = _run_on_release("repro_client_hash.py", version)
    takes = _declares(version, "S8")
    assert done.returncode == (1 if takes else 0), done.stdout + done.stderr
    wanted = "B TAKES A'S IDENTITY" if takes else "B keeps an identity of its own"
    assert wanted in done.stdout, done.stdout

"""The SGLang CI job: every pinned SGLang release against the verdicts declared for it
(``adapters/sglang/expected/<version>.json``), and the adapter's own tests beside them.

``.venv-sglang/bin/python adapters/sglang/ci.py`` (``make verify-sglang-ci``):

1. fetches each pinned release (``adapters/sglang/fetch.py``);
2. runs the clauses of the components the adapter provides — HASH-9/HASH-10 (the
   feature hasher), EMB (the embedding cache), PFX (the block hasher; PFX-7/PFX-8
   through the radix key's namespace), SPL and DIFF-1..3 (the
   splice) — and ECD, whose component SGLang has no counterpart of (declared ``not
   provided``), in a process per release (``MMSPEC_SGLANG_SRC``), ``--jobs`` (2) at once,
   saving ``reports/sglang/<version>.json`` and the full report ``<version>.txt``;
3. compares: every row must have its declared verdict (``pass`` when undeclared), and
   the components must be the declared ones, so a new failure, a finding that stops
   failing, or a component that stops (or starts) being provided turns the job red;
4. runs ``tests/test_sglang_adapter.py`` with ``MMSPEC_REQUIRE_SGLANG=1`` (the proof that
   the code under test never touches the torchvision shim, S1's reproducer,
   ``repro_pad_collision.py``, run on each release's code alone as declared, and
   ``repro_feature_hash.py``'s, ``repro_oversized_evicts.py``'s and ``repro_client_hash.py``'s:
   S6's, S7's and S8's),
   first among the ``--jobs`` tasks: it is the longest, so the releases run on the other
   worker while it does.

Exit status 0 when everything matches, 1 otherwise. Run as a script, by path.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))

from harness.baseline import load_verdicts  # noqa: E402 - after the path set-up above

#: Newest first: the release the adapter was written against, then older ones.
PINNED = ("0.5.23", "0.5.22", "0.5.3")
CLAUSES = (
    "HASH-9", "HASH-10", "HASH-11", "EMB-1", "EMB-2",
    "PFX-1", "PFX-2", "PFX-3", "PFX-4", "PFX-5", "PFX-6", "PFX-7", "PFX-8",
    "SPL-1", "SPL-2", "SPL-3", "SPL-4", "SPL-5", "DIFF-1", "DIFF-2", "DIFF-3",
    "ECD-1", "ECD-2", "ECD-3", "ECD-4", "ECD-5", "ECD-6",
    "WRK-1", "WRK-2", "WRK-3", "WRK-4", "WRK-5",
)
EXPECTED_DIR = HERE / "expected"
REPORTS = ROOT / "reports" / "sglang"


def _fetch_module() -> Any:
    spec = importlib.util.spec_from_file_location("_mmspec_sglang_fetch", HERE / "fetch.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def verify(version: str, tree: Path) -> Path:
    """Run :data:`CLAUSES` against ``tree``; the saved verdicts' path."""
    REPORTS.mkdir(parents=True, exist_ok=True)
    saved = REPORTS / f"{version}.json"
    command = [
        sys.executable, "-m", "properties", "verify", "--adapter", "adapters/sglang",
        "--profile", "ci", "--save-report", str(saved), "--only", *CLAUSES,
    ]
    env = {**os.environ, "MMSPEC_SGLANG_SRC": str(tree), "PYTHONPATH": str(ROOT)}
    with (REPORTS / f"{version}.txt").open("w", encoding="utf-8") as out:
        subprocess.run(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    return saved


def compare(version: str, saved: Path) -> list[str]:
    """What differs from the declaration (empty: as declared)."""
    declared: Any = json.loads((EXPECTED_DIR / f"{version}.json").read_text(encoding="utf-8"))
    expected = {(r["clause"], r["property"]): r["verdict"] for r in declared["expected"]}
    expected |= {(r["clause"], r["property"]): r["verdict"] for r in declared["no_equivalent"]}
    expected |= {(r["clause"], r["property"]): r["verdict"] for r in declared["not_provided"]}
    try:
        run = load_verdicts(saved)
    except Exception as e:  # noqa: BLE001 - a run that saved nothing is a difference
        return [f"no saved report ({e}); see {saved.with_suffix('.txt')}"]
    differs = []
    components = {
        name: ("sglang" if who.startswith("sglang ") else who)
        for name, who in run.components.items()
    }
    if components != declared["components"]:
        differs.append(f"components {components}, declared {declared['components']}")
    seen = set()
    for key, row in run.by_key().items():
        seen.add(key)
        want = expected.get(key, "pass")
        if row.verdict != want:
            differs.append(f"{key[0]} {key[1]}: {row.verdict}, declared {want}")
    differs += [f"{c} {p}: declared {v} but not in the run" for (c, p), v in expected.items()
                if (c, p) not in seen]
    return differs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python adapters/sglang/ci.py")
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument(
        "--jobs", type=int, default=2, metavar="N",
        help="releases verified at once, each in a process of its own (default: 2, the "
        "CI machine's cores)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    fetch = _fetch_module()
    trees = {version: fetch.fetch(version, quiet=True) for version in PINNED}

    def checked(version: str) -> tuple[list[str], float]:
        started = time.perf_counter()
        return compare(version, verify(version, trees[version])), time.perf_counter() - started

    def tested() -> bool:
        env = {**os.environ, "MMSPEC_REQUIRE_SGLANG": "1", "PYTHONPATH": str(ROOT)}
        tests = [sys.executable, "-m", "pytest", "-q", "tests/test_sglang_adapter.py"]
        return subprocess.run(tests, cwd=ROOT, env=env).returncode == 0

    # Each release runs in a child process of its own (verify above), and so do the
    # tests: threads only wait. The tests (the longest task) start first, beside the
    # releases, on the first worker.
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        tests_passed = None if args.skip_tests else pool.submit(tested)
        outcomes = dict(zip(PINNED, pool.map(checked, PINNED), strict=True))
        ok = tests_passed.result() if tests_passed is not None else True
    for version in PINNED:  # printed in the pinned order, whatever finished first
        differs, seconds = outcomes[version]
        ok &= not differs
        status = "as declared" if not differs else "DIFFERS"
        print(f"sglang {version}: {status} ({seconds:.0f} s)")
        for line in differs:
            print(f"  {line}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""The CI engine job: run the suite against every pinned vLLM release and compare the
verdicts with the findings declared for it (``adapters/vllm/expected/<version>.json``).

``python adapters/vllm/ci.py`` (``make verify-vllm-ci``):

1. fetches each pinned release's source (``adapters/vllm/fetch.py``);
2. verifies each in a process of its own, in parallel (``--jobs``), saving the verdicts
   to ``reports/vllm/<version>.json`` and the full report to ``<version>.txt``;
3. compares them with the declaration: every row that is not ``pass``/``not provided``
   must be declared with exactly that verdict, every declared row must have it, and the
   components vLLM provides must be the declared ones — so a new failure, a finding that
   stops failing, or a component that silently stops being provided turns CI red;
4. prints the verdicts that differ between consecutive releases (``--baseline``'s
   output: what changed from 0.22.1 to 0.33.0);
5. runs ``tests/test_vllm_adapter.py``, ``tests/test_vllm_engine.py`` and
   ``tests/test_vllm_runner.py`` with ``MMSPEC_REQUIRE_VLLM=1`` on the first worker step 2
   frees, in two pytest-xdist workers (their output is printed whole at the end), so
   that their vLLM tests fail
   instead of skipping (the proof that the adapter runs vLLM's code, that vLLM's
   Scheduler, the engine loop, never calls a stand-in, and that the runner's methods
   behind the worker store call only the one listed);
6. runs each variant a release declares (``"variants"``: ``shm``, vLLM's shared-memory
   processor cache pair, with ``$MMSPEC_VLLM_PROCESSOR_CACHE=shm``; ``v2``, model runner
   V2's code behind the worker store, with ``$MMSPEC_VLLM_MODEL_RUNNER=v2``) on the
   properties it declares, saved as ``<version>-<variant>.json``/``.txt``, and compares
   them with its rows.

Exit status 0 when everything matches, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

# Run as a script (`python adapters/vllm/ci.py`), not as `adapters.vllm.ci`: importing the
# package adapters.vllm imports vLLM, which this process never does (each release runs in
# a child process of its own). The script's directory must not shadow top-level modules.
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))

from harness.baseline import (  # noqa: E402 - after the path set-up above
    SavedVerdicts,
    load_verdicts,
    render_differences,
)
from harness.declared import (  # noqa: E402
    DEFAULT_VARIANT,
    VARIANT_VARIABLES,
    load_declaration,
    variant_environment,
    variant_rows,
)


def _sibling(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_mmspec_vllm_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_fetch = _sibling("fetch")
DEFAULT_CACHE: Path = _fetch.DEFAULT_CACHE
fetch = _fetch.fetch
EXPECTED_DIR = HERE / "expected"
ACCEPTED = frozenset({"pass", "not provided"})
ADAPTER = "adapters/vllm"


@dataclass(frozen=True)
class Expected:
    """One version's declaration."""

    version: str
    profile: str
    #: component -> "vllm", "reference" or "not provided"
    components: dict[str, str]
    #: (clause, property) -> (verdict, finding id)
    rows: dict[tuple[str, str], tuple[str, str]]
    #: variant -> (the properties it runs, their declared rows, the components whose
    #: provider it declares otherwise)
    variants: dict[
        str,
        tuple[tuple[str, ...], dict[tuple[str, str], tuple[str, str]], dict[str, str]],
    ] = field(default_factory=dict)


def load_expected(path: Path) -> Expected:
    data: Any = json.loads(path.read_text(encoding="utf-8"))
    variants = {}
    for name, declared in data.get("variants", {}).items():
        properties = tuple(str(p) for p in declared["properties"])
        rows = variant_rows(data, str(name), path)
        variants[str(name)] = (
            properties,
            {key: row for key, row in rows.items() if key[1] in properties},
            {str(k): str(v) for k, v in declared.get("components", {}).items()},
        )
    return Expected(
        version=str(data["version"]),
        profile=str(data["profile"]),
        components={str(k): str(v) for k, v in data["components"].items()},
        rows=variant_rows(data, DEFAULT_VARIANT, path),
        variants=variants,
    )


def for_variant(expected: Expected, variant: str) -> Expected:
    """The declaration a run of ``variant``'s properties alone is compared with."""
    _properties, rows, components = expected.variants[variant]
    return dataclasses.replace(
        expected, rows=rows, components={**expected.components, **components}, variants={}
    )


def pinned_versions() -> list[Expected]:
    declared = [load_expected(p) for p in EXPECTED_DIR.glob("*.json")]
    return sorted(declared, key=lambda e: tuple(int(x) for x in e.version.split(".")))


def owner_kind(owner: str) -> str:
    return owner if owner in ("reference", "not provided") else "vllm"


def compare(expected: Expected, saved: SavedVerdicts) -> list[str]:
    """Every way the run departs from the declaration (empty: it matches)."""
    problems: list[str] = []
    if saved.profile != expected.profile:
        problems.append(f"ran in profile {saved.profile}, declared for {expected.profile}")
    components = {c: owner_kind(o) for c, o in saved.components.items()}
    if components != expected.components:
        for component in sorted(set(components) | set(expected.components)):
            got, want = components.get(component, "—"), expected.components.get(component, "—")
            if got != want:
                problems.append(f"component {component}: provided by {got}, declared {want}")
    seen = set()
    for row in saved.rows:
        key = (row.clause, row.property)
        seen.add(key)
        declared = expected.rows.get(key)
        if declared is None:
            if row.verdict not in ACCEPTED:
                detail = f": {row.messages[0]}" if row.messages else ""
                problems.append(
                    f"NEW {row.verdict}: {row.clause} {row.property} (no finding declares it)"
                    f"{detail}"
                )
        elif declared[0] != row.verdict:
            problems.append(
                f"{row.clause} {row.property}: {row.verdict}, but finding {declared[1]} "
                f"declares {declared[0]}"
                + (" — the finding stopped failing" if row.verdict in ACCEPTED else "")
            )
    for key, (verdict, finding) in expected.rows.items():
        if key not in seen:
            problems.append(f"{key[0]} {key[1]}: declared {verdict} ({finding}) but not in the run")
    return problems


def verify_version(
    expected: Expected, tree: Path, out: Path, variant: str = DEFAULT_VARIANT
) -> tuple[Path, float, int]:
    """Run the suite on ``tree`` in a child process — for a ``variant`` other than the
    default, only the properties it declares, with the variable that selects it set; the
    saved verdicts' path, seconds and exit status."""
    stem = expected.version if variant == DEFAULT_VARIANT else f"{expected.version}-{variant}"
    saved = out / f"{stem}.json"
    command = [
        sys.executable, "-m", "properties", "verify", "--adapter", ADAPTER,
        "--profile", expected.profile, "--vllm-src", str(tree), "--save-report", str(saved),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MMSPEC_VLLM_SRC", None)
    for variable in VARIANT_VARIABLES:
        env.pop(variable, None)
    if variant != DEFAULT_VARIANT:
        command += ["--only", *expected.variants[variant][0]]
        env.update(variant_environment(variant))
    started = time.perf_counter()
    with (out / f"{stem}.txt").open("w") as report, (out / f"{stem}.log").open("w") as log:
        status = subprocess.run(command, cwd=ROOT, env=env, stdout=report, stderr=log).returncode
    return saved, time.perf_counter() - started, status


#: The tests that prove the adapter runs vLLM's code (they skip without it elsewhere).
VLLM_TESTS = ("tests/test_vllm_adapter.py", "tests/test_vllm_engine.py",
              "tests/test_vllm_runner.py")


def run_tests(trees: dict[str, Path], out: Path) -> tuple[Path, float, int]:
    """Run the vLLM tests in a child process, its output kept in ``out/tests.txt`` (they
    run beside a release's verification, so their lines must not interleave with it);
    that file's path, the seconds and the exit status."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), MMSPEC_REQUIRE_VLLM="1")
    for variable in VARIANT_VARIABLES:
        env.pop(variable, None)
    env["MMSPEC_VLLM_TREES"] = os.pathsep.join(f"{v}={t}" for v, t in trees.items())
    # Two xdist workers: the tests start beside the slower release, and take its
    # worker too when it is done (26 tests of 15-45 s each, every one its own processes).
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-n", "2", "--dist", "worksteal", *VLLM_TESTS]
    output = out / "tests.txt"
    started = time.perf_counter()
    with output.open("w") as sink:
        status = subprocess.run(
            command, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT
        ).returncode
    return output, time.perf_counter() - started, status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python adapters/vllm/ci.py", description=__doc__)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "vllm")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--skip-tests", action="store_true")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    declared = pinned_versions()
    args.out.mkdir(parents=True, exist_ok=True)
    trees = {}
    for expected in declared:
        fetch_started = time.perf_counter()
        trees[expected.version] = fetch(expected.version, args.cache, quiet=True)
        print(f"vllm {expected.version}: source tree {trees[expected.version]} "
              f"({time.perf_counter() - fetch_started:.0f} s)", flush=True)

    # The slowest release first (the oldest: it fails most, and shrinking is the cost);
    # the tests go to whichever worker frees first, not after every release is done.
    # The variants (a few properties each) after the tests: they fit
    # on the worker the slower release frees while the tests run on the other.
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        pending = [pool.submit(verify_version, e, trees[e.version], args.out) for e in declared]
        tests = None if args.skip_tests else pool.submit(run_tests, trees, args.out)
        variant_runs = [
            (e, variant, pool.submit(verify_version, e, trees[e.version], args.out, variant))
            for e in declared
            for variant in e.variants
        ]
        runs = [future.result() for future in pending]

    ok = True
    saved_by_version: dict[str, SavedVerdicts] = {}
    for expected, (saved_path, seconds, status) in zip(declared, runs, strict=True):
        if status not in (0, 1) or not saved_path.is_file():
            ok = False
            print(f"vllm {expected.version}: the run failed (exit {status}); see "
                  f"{args.out / (expected.version + '.log')}")
            continue
        saved = load_verdicts(saved_path)
        saved_by_version[expected.version] = saved
        problems = compare(expected, saved)
        failing = sum(row.verdict not in ACCEPTED for row in saved.rows)
        print(f"vllm {expected.version}: {len(saved.rows)} clause rows, {failing} neither pass "
              f"nor not provided, suite {seconds:.0f} s: "
              + ("as declared in " + f"expected/{expected.version}.json" if not problems
                 else f"{len(problems)} DIFFERENCES from expected/{expected.version}.json"))
        for problem in problems:
            print(f"  - {problem}")
        declaration = load_declaration(expected.version)  # every finding has a class
        assert declaration is not None
        for kind in ("defect", "hazard"):
            ids = sorted((f for f, (c, _) in declaration.findings.items() if c == kind),
                         key=lambda f: int(f[1:]))
            print(f"  {kind}s: {', '.join(ids) or 'none'}")
        ok = ok and not problems

    for expected, variant, future in variant_runs:
        saved_path, seconds, status = future.result()
        selected = " ".join(f"{k}={v}" for k, v in variant_environment(variant).items())
        label = f"vllm {expected.version} ({selected})"
        if status not in (0, 1) or not saved_path.is_file():
            ok = False
            print(f"{label}: the run failed (exit {status}); see {saved_path.with_suffix('.log')}")
            continue
        saved = load_verdicts(saved_path)
        problems = compare(for_variant(expected, variant), saved)
        print(f"{label}: {len(saved.rows)} clause rows of "
              f"{', '.join(expected.variants[variant][0])}, {seconds:.0f} s: "
              + ("as declared" if not problems else f"{len(problems)} DIFFERENCES"))
        for problem in problems:
            print(f"  - {problem}")
        ok = ok and not problems

    versions = [e.version for e in declared if e.version in saved_by_version]
    for older, newer in zip(versions, versions[1:], strict=False):
        print(f"\n--- verdicts that differ from {older} to {newer} "
              f"(python -m properties verify --vllm {newer} --baseline {older}) ---")
        sys.stdout.write(render_differences(saved_by_version[older], saved_by_version[newer]))

    if tests is not None:
        output, seconds, status = tests.result()
        print(f"\n--- {' '.join(VLLM_TESTS)} ({seconds:.0f} s, "
              f"exit {status}) ---", flush=True)
        sys.stdout.write(output.read_text(encoding="utf-8", errors="replace"))
        ok = status == 0 and ok
    print(f"\nengine job: {'OK' if ok else 'FAILED'} in {time.perf_counter() - started:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

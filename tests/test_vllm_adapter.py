"""The vLLM adapter runs vLLM's own code: loading, the API table, and the proof that it
is no re-implementation (a defect reintroduced into vLLM's file turns its property red).

vLLM runs in child processes (one vLLM tree per process), under this interpreter, from
the release trees named by ``MMSPEC_VLLM_TREES`` (``0.22.1=/path:0.33.0=/path``, set by
the CI engine job, ``make verify-vllm-ci``) or found in ``.vllm-cache/``. Without them,
or without vLLM's import chain in this environment (``.venv-vllm`` has it), the vLLM
tests skip — except under ``MMSPEC_REQUIRE_VLLM=1`` (the engine job), where they fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.baseline import SavedVerdicts, load_verdicts
from harness.names import CODE_SELECTING_VARIABLES

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".vllm-cache"
NEWEST = "0.33.0"
PINNED = ("0.22.1", NEWEST)
REQUIRED = os.environ.get("MMSPEC_REQUIRE_VLLM") == "1"


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"MMSPEC_REQUIRE_VLLM=1 but {reason}")
    pytest.skip(f"{reason}: `make verify-vllm-ci` runs these (docs/vllm.md)")


def vllm_tree(version: str) -> Path:
    """The release tree of ``version`` (skips, or fails under MMSPEC_REQUIRE_VLLM=1)."""
    for chain in ("torch", "transformers"):
        if importlib.util.find_spec(chain) is None:
            _unavailable(f"vLLM's import chain ({chain}) is not installed here (.venv-vllm has it)")
    named = dict(
        entry.split("=", 1)
        for entry in os.environ.get("MMSPEC_VLLM_TREES", "").split(os.pathsep)
        if "=" in entry
    )
    tree = Path(named.get(version) or CACHE / f"vllm-{version}")
    if not (tree / "vllm" / "__init__.py").is_file():
        _unavailable(f"no vLLM {version} tree at {tree} (python adapters/vllm/fetch.py {version})")
    return tree


def child_env(tree: Path | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MMSPEC_VLLM_SRC", None)
    for variable in CODE_SELECTING_VARIABLES:  # vLLM's defaults unless a test says
        env.pop(variable, None)
    if tree is not None:
        env["MMSPEC_VLLM_SRC"] = str(tree)
    return env


def verify(tree: Path, only: list[str], saved: Path) -> SavedVerdicts:
    """``python -m properties verify --vllm-src tree --only ...`` in a child process."""
    command = [sys.executable, "-m", "properties", "verify", "--vllm-src", str(tree),
               "--save-report", str(saved), "--only", *only]
    completed = subprocess.run(command, cwd=ROOT, env=child_env(None), capture_output=True,
                               text=True)
    assert completed.returncode in (0, 1), completed.stderr[-3000:]
    return load_verdicts(saved)


def verdict(saved: SavedVerdicts, clause: str, prop: str) -> str:
    return saved.by_key()[(clause, prop)].verdict


# --- loading ------------------------------------------------------------------------------

_DESCRIBE = """
import json, adapters.vllm as a
print(json.dumps({
    "version": a.SOURCE.version, "kind": a.SOURCE.kind,
    "package_dir": str(a.SOURCE.package_dir), "name": a.ADAPTER.name,
    "not_provided": a.NOT_PROVIDED,
    "api": {c: dict(api.new_form) for c, api in a.APIS.items()},
}))
"""

#: What the table must resolve for each pinned release (rows of adapters/vllm/versions.py).
EXPECTED_API = {
    "0.22.1": {
        "encoder_units": True, "hook_shift": True, "hook_external_loads": True,
        "hook_duplicates": False, "hook_mismatch_guard": False,
        "hasher_algorithm_arg": False, "hash_fn_module": True,
        "mm_extra_key_offset": True, "mm_extra_key_tag": False,
        "runner_free_method": False,
    },
    "0.33.0": {
        "encoder_units": True, "hook_shift": True, "hook_external_loads": True,
        "hook_duplicates": True, "hook_mismatch_guard": True,
        "hasher_algorithm_arg": True, "hash_fn_module": True,
        "mm_extra_key_offset": True, "mm_extra_key_tag": True,
        "runner_free_method": True,
    },
}


@pytest.mark.parametrize("version", PINNED)
def test_the_tree_under_test_is_what_runs(version: str) -> None:
    """vllm is imported from the tree (never an installed copy), every wrapped component
    is provided, and the API table resolves as recorded for the release."""
    tree = vllm_tree(version)
    completed = subprocess.run([sys.executable, "-c", _DESCRIBE], cwd=ROOT,
                               env=child_env(tree), capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr[-3000:]
    facts = json.loads(completed.stdout.strip().splitlines()[-1])
    assert facts["version"] == version
    assert facts["kind"] == "source"
    assert Path(facts["package_dir"]).is_relative_to(tree.resolve())
    assert facts["not_provided"] == {}
    assert str(tree.resolve()) in facts["name"]
    resolved = {row: form for rows in facts["api"].values() for row, form in rows.items()}
    assert resolved == EXPECTED_API[version]


_DEADLINE = """
import json, time
from adapters.vllm.item_cache import DEADLINE_CPU_S, VllmHangError, _guarded
started = time.perf_counter()
try:
    _guarded("a loop", lambda: [None for _ in iter(int, 1)])
    looped = "returned"
except VllmHangError as hang:
    looped = str(hang)
loop_s = time.perf_counter() - started
started = time.perf_counter()
slept = _guarded("a sleep", lambda: time.sleep(3 * DEADLINE_CPU_S) or "returned")
print(json.dumps({"looped": looped, "loop_s": loop_s, "slept": slept,
                  "sleep_s": time.perf_counter() - started, "deadline": DEADLINE_CPU_S}))
"""


def test_a_call_that_loops_is_stopped_by_cpu_time_and_a_wait_is_not() -> None:
    """V19's hang (0.22.1's ``LRUCache`` eviction loops forever) costs the run one
    deadline per program that meets it: the deadline counts the process's CPU time, a
    fraction of a second, and a call that waits without computing (a descheduled process
    on a loaded machine) is never taken for a hang."""
    tree = vllm_tree(PINNED[0])
    completed = subprocess.run([sys.executable, "-c", _DEADLINE], cwd=ROOT,
                               env=child_env(tree), capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr[-3000:]
    facts = json.loads(completed.stdout.strip().splitlines()[-1])
    assert facts["looped"] == (
        f"a loop did not return within {facts['deadline']} s of CPU time (vLLM loops)"
    )
    assert facts["deadline"] <= facts["loop_s"] < 1.0
    assert facts["slept"] == "returned" and facts["sleep_s"] >= 3 * facts["deadline"]


_REPRO_V20 = ROOT / "adapters" / "vllm" / "repro_encdec_slots.py"


@pytest.mark.parametrize("version", PINNED)
def test_v20_the_schedulers_own_calls_push_the_free_slots_past_the_cache(version: str) -> None:
    """Finding V20 through vLLM's own Scheduler methods (docs/findings.md): a request's
    encoder input of 4 embeddings, a cache of 8. ``_free_encoder_inputs`` after each of
    five steps credits the input again, and ``free`` at its finish once more; the step
    after, the compute budget alone bounds what is allocated (the hazard's guard)."""
    tree = vllm_tree(version)
    completed = subprocess.run([sys.executable, str(_REPRO_V20)], cwd=ROOT,
                               env=child_env(tree), capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr[-3000:]
    facts = json.loads(completed.stdout.strip().splitlines()[-1])
    assert facts["free_slots"] == [8, 4, 8, 12, 16, 20, 24, 28]
    assert facts["admitted"] == ["r2", "r3"]
    assert facts["embeds_allocated_next_step"] <= facts["cache_size"]


def test_a_path_that_is_no_vllm_tree_is_refused(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", "import adapters.vllm"], cwd=ROOT, env=child_env(tmp_path),
        capture_output=True, text=True,
    )
    assert completed.returncode != 0
    assert "VllmSourceError" in completed.stderr
    assert f"{tmp_path}/vllm/__init__.py" in completed.stderr


def test_a_processor_cache_pair_it_does_not_know_is_refused_before_vllm_loads() -> None:
    """MMSPEC_VLLM_PROCESSOR_CACHE names the item cache pair (lru, shm): any other value
    is one line naming the choices, with or without vLLM installed."""
    env = dict(child_env(None), MMSPEC_VLLM_PROCESSOR_CACHE="foo")
    completed = subprocess.run(
        [sys.executable, "-c", "import adapters.vllm"], cwd=ROOT, env=env,
        capture_output=True, text=True,
    )
    assert completed.returncode != 0
    assert "VllmSourceError: MMSPEC_VLLM_PROCESSOR_CACHE='foo': choose one of lru, shm" in (
        completed.stderr
    ), completed.stderr[-2000:]


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"MMSPEC_VLLM_MODEL_RUNNER": "v3"},
         "VllmSourceError: MMSPEC_VLLM_MODEL_RUNNER='v3': choose one of v1, v2"),
        ({"MMSPEC_VLLM_MODEL_RUNNER": "v2", "MMSPEC_VLLM_PROCESSOR_CACHE": "shm"},
         "VllmSourceError: one variant at a time: MMSPEC_VLLM_PROCESSOR_CACHE=shm and "
         "MMSPEC_VLLM_MODEL_RUNNER=v2"),
    ],
)
def test_a_model_runner_it_does_not_know_or_two_variants_are_refused_before_vllm_loads(
    variables: dict[str, str], message: str
) -> None:
    """MMSPEC_VLLM_MODEL_RUNNER names the runner behind the worker store (v1, v2); the
    declarations hold each variant's rows against the release's defaults, so two
    variants at once are refused too — one line each, with or without vLLM."""
    completed = subprocess.run(
        [sys.executable, "-c", "import adapters.vllm"], cwd=ROOT,
        env={**child_env(None), **variables}, capture_output=True, text=True,
    )
    assert completed.returncode != 0
    assert message in completed.stderr, completed.stderr[-2000:]


def test_without_vllm_the_adapter_fails_to_load_with_one_clear_line() -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip(
            "vllm is installed in this environment, and this test checks the message shown"
            " without it (nothing to do: the plain .venv runs it)"
        )
    probe = (
        "from harness.loader import AdapterLoadError, load_adapter\n"
        "try:\n    load_adapter('adapters/vllm')\n"
        "except AdapterLoadError as e:\n    print(e)\n"
    )
    completed = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=child_env(None),
                               capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "vllm adapter unavailable: vllm is not installed" in completed.stdout
    assert "MMSPEC_VLLM_SRC" in completed.stdout


# --- the proof of no re-implementation ----------------------------------------------------


@dataclass(frozen=True)
class Mutation:
    """A known defect, reintroduced into vLLM's own file, and the row it must turn red."""

    name: str
    file: str
    original: str
    defect: str
    clause: str
    property: str


MUTATIONS = (
    Mutation(
        name="encoder cache manager: the budget boundary (> becomes >=)",
        file="vllm/v1/core/encoder_cache_manager.py",
        original="        if num_embeds > encoder_compute_budget:",
        defect="        if num_embeds >= encoder_compute_budget:",
        clause="SCH-10",
        property="sch_progress_with_sized_budget",
    ),
    # (v0.22.1's `<` in the disable_chunked_mm_input rollback used to stand here; 0.33.0
    # now fails SCH-6 on its own, V12, so that row cannot turn red.)
    Mutation(
        name="encoder cache manager: v0.22.1's drain, held hashes reported freed (#52482)",
        file="vllm/v1/core/encoder_cache_manager.py",
        original="freed = [mm_hash for mm_hash in self.freed if mm_hash not in self.cached]",
        defect="freed = list(self.freed)",
        clause="ECM-7",
        property="EncoderCacheMachine",
    ),
    Mutation(
        name="encoder-decoder cache manager: the drain before #32789 (vLLM #31577), the "
        "step's own allocations reported",
        file="vllm/v1/core/encoder_cache_manager.py",
        original="        return to_free\n",
        defect="        return self.to_free\n",
        clause="ECD-5",
        property="EncoderDecoderCacheMachine",
    ),
)


def mutated_copy(tree: Path, mutation: Mutation, into: Path) -> Path:
    """A copy of the release tree (hard links, except the one file rewritten) with the
    defect in vLLM's file."""
    copy = into / f"vllm-{NEWEST}-mutated"
    try:
        shutil.copytree(tree / "vllm", copy / "vllm", copy_function=os.link)
    except OSError:  # another filesystem: copy for real
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(tree / "vllm", copy / "vllm")
    target = copy / mutation.file
    source = (tree / mutation.file).read_text(encoding="utf-8")
    assert source.count(mutation.original) == 1, f"{mutation.file} changed upstream"
    target.unlink()  # a hard link: never write through it into the pristine tree
    target.write_text(source.replace(mutation.original, mutation.defect), encoding="utf-8")
    return copy


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> SavedVerdicts:
    tree = vllm_tree(NEWEST)
    saved = tmp_path_factory.mktemp("pristine") / "verdicts.json"
    return verify(tree, [m.property for m in MUTATIONS], saved)


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.clause)
def test_a_defect_reintroduced_into_vllms_file_turns_its_property_red(
    mutation: Mutation, pristine: SavedVerdicts, tmp_path: Path
) -> None:
    tree = vllm_tree(NEWEST)
    assert verdict(pristine, mutation.clause, mutation.property) == "pass"
    copy = mutated_copy(tree, mutation, tmp_path)
    mutated = verify(copy, [mutation.property], tmp_path / "verdicts.json")
    assert str(copy) in mutated.adapter, "the run must have imported the mutated copy"
    assert verdict(mutated, mutation.clause, mutation.property) == "FAIL", mutation.name
    # The pristine tree was not touched through the hard links.
    assert (tree / mutation.file).read_text(encoding="utf-8").count(mutation.original) == 1

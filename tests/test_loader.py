"""The adapter loader (spec/adapter.py): a malformed adapter fails at once with one
message listing everything that is wrong, and the CLI exits 2 with that message."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.loader import (
    NOT_PROVIDED,
    AdapterLoadError,
    arity_problem,
    build_parts,
    load_adapter,
)
from spec.adapter import COMPONENTS, Adapter
from spec.components import Hasher, SchedulingHook

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def problems_of(ref: str) -> list[str]:
    with pytest.raises(AdapterLoadError) as caught:
        load_adapter(ref)
    assert caught.value.ref == ref
    return caught.value.problems


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        pytest.param(
            "tests.fixtures.no_such_module",
            "module tests.fixtures.no_such_module not found",
            id="module-missing",
        ),
        pytest.param(
            "tests/fixtures/no_such_file.py",
            "no such file or directory: tests/fixtures/no_such_file.py",
            id="file-missing",
        ),
        pytest.param(
            "tests/fixtures/import_error.py",
            "importing tests/fixtures/import_error.py failed: ModuleNotFoundError: No module "
            "named 'mmspec_fixture_dependency_that_does_not_exist' "
            "(at tests/fixtures/import_error.py:7)",
            id="import-error",
        ),
        pytest.param(
            "tests/fixtures/no_adapter.py",
            "tests/fixtures/no_adapter.py has no attribute ADAPTER",
            id="no-ADAPTER",
        ),
        pytest.param(
            "tests.fixtures.no_adapter",
            "module tests.fixtures.no_adapter has no attribute ADAPTER",
            id="no-ADAPTER-by-module-name",
        ),
        pytest.param(
            "tests/fixtures/wrong_type.py",
            "ADAPTER is a builtins.dict, not a spec.adapter.Adapter",
            id="wrong-type",
        ),
        pytest.param(
            "tests/fixtures/missing_method.py",
            "splice: InjectOnlySplice lacks method merge(inputs_embeds, mm_embeds, "
            "is_multimodal)",
            id="missing-method",
        ),
        pytest.param(
            "tests/fixtures/wrong_arity.py",
            "hasher: NoOptionsHasher.hash_item: accepts only 1 argument (data), but the "
            "Protocol's hash_item(data, options=…) may pass 2",
            id="wrong-arity",
        ),
    ],
)
def test_malformed_adapter_names_its_problem(ref: str, expected: str) -> None:
    problems = problems_of(ref)
    assert len(problems) == 1, problems
    assert expected in problems[0]


def test_every_problem_is_listed_at_once() -> None:
    problems = problems_of("tests/fixtures/many_problems.py")
    expected = [
        "hasher: the factory is a str, not callable",
        "encoder: GreedyEncoder.hidden_size must be a property (an attribute), not a method",
        "encoder: GreedyEncoder.encode: requires 3 arguments (image, num_embeds, seed), "
        "but the Protocol's encode(image, num_embeds) passes only 2",
        "encoder_cache_manager: HalfCacheManager lacks property num_free_slots",
        "encoder_cache_manager: HalfCacheManager lacks method can_allocate(request, "
        "input_id, encoder_compute_budget, num_embeds_to_schedule)",
        "encoder_cache_manager: HalfCacheManager lacks method get_freed_mm_hashes()",
        "splice: factory() raised RuntimeError: the splice cannot be built",
    ]
    for text in expected:
        assert any(text in p for p in problems), (text, problems)
    # cache_size is present; every other EncoderCacheManager member is reported.
    assert not any("cache_size of" in p for p in problems)
    assert sum(p.startswith("encoder_cache_manager:") for p in problems) == 11
    assert len(problems) == 15
    message = str(AdapterLoadError("x", problems))
    assert message.splitlines()[0] == "cannot load adapter 'x': 15 problems"
    assert len(message.splitlines()) == 16


def test_cli_exits_2_with_one_clear_message() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "properties",
            "verify",
            "--adapter",
            "tests/fixtures/many_problems.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2
    assert completed.stdout == ""
    lines = completed.stderr.strip().splitlines()
    assert lines[0] == "cannot load adapter 'tests/fixtures/many_problems.py': 15 problems"
    assert all(line.startswith("  - ") for line in lines[1:])
    assert "Traceback" not in completed.stderr


def test_well_formed_file_package_and_module_refs_load() -> None:
    by_file = load_adapter("tests/fixtures/good_adapter.py")
    by_dir = load_adapter(str(FIXTURES / "package_adapter"))  # relative import inside
    by_name = load_adapter("tests.fixtures.good_adapter")
    assert by_file.name == by_name.name == "fixture-good"
    assert by_dir.name == "fixture-package"
    assert by_file.provides("hasher") and not by_file.provides("encoder")
    assert by_file.origin == str((FIXTURES / "good_adapter.py").resolve())
    # Identity keys the example database: same name, different file -> different key.
    assert by_file.identity.startswith("fixture-good-")
    assert by_file.identity == by_name.identity
    assert by_file.identity != load_adapter("tests/fixtures/package_adapter").identity


def test_the_reference_is_well_formed() -> None:
    loaded = load_adapter("reference")
    assert loaded.module_name == "reference.adapter"
    assert loaded.name == "reference"


def test_build_parts_fills_gaps_and_names_who_stands_behind_each() -> None:
    good = load_adapter("tests/fixtures/good_adapter.py").adapter
    fallback = Adapter(name="stand-in", encoder=lambda hidden_size: object())  # type: ignore[arg-type, return-value]
    parts = build_parts(good, fallback)
    assert parts.provenance["hasher"] == "fixture-good"
    assert parts.provenance["encoder"] == "stand-in"
    assert parts.provenance["splice"] == NOT_PROVIDED
    assert list(parts.provenance) == [name for name, _ in COMPONENTS]
    assert parts.hasher is good.hasher
    with pytest.raises(NotImplementedError, match="splice"):
        parts.splice()


def test_the_code_behind_a_component_is_named_after_the_adapter() -> None:
    """``Adapter.implemented_by`` (the vLLM adapter's engine loop is vLLM's Scheduler) is
    shown with the adapter's name, only for components the adapter provides."""
    good = load_adapter("tests/fixtures/good_adapter.py").adapter
    named = dataclasses.replace(
        good, implemented_by={"hasher": "its own hasher", "splice": "not provided here"}
    )
    parts = build_parts(named, None)
    assert parts.provenance["hasher"] == "fixture-good: its own hasher"
    assert parts.provenance["splice"] == NOT_PROVIDED


class _Declared:
    """Protocol-style declarations to compare implementations against."""

    def two(self, a: int, b: int) -> None: ...

    def one_optional(self, a: int, b: int = 0) -> None: ...


def _bound(function: Callable[..., Any]) -> Callable[..., Any]:
    return function.__get__(object())  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize(
    ("declared", "implemented", "verdict"),
    [
        (_Declared.two, lambda a, b: None, None),
        (_Declared.two, lambda *args: None, None),
        (_Declared.two, lambda a, b, c=1: None, None),
        (_Declared.two, lambda a, b, *, flag=False: None, None),
        (_Declared.two, lambda a: None, "accepts only 1 argument (a)"),
        (_Declared.two, lambda a, b, c: None, "requires 3 arguments (a, b, c)"),
        (_Declared.two, lambda a, b, *, flag: None, "requires keyword-only flag"),
        (_Declared.one_optional, lambda a, b=0: None, None),
        (_Declared.one_optional, lambda a, b: None, "requires 2 arguments (a, b)"),
    ],
)
def test_arity_rule(
    declared: Callable[..., Any], implemented: Callable[..., Any], verdict: str | None
) -> None:
    problem = arity_problem(declared, implemented)
    if verdict is None:
        assert problem is None
    else:
        assert problem is not None and problem.startswith(verdict), problem


def test_arity_rule_on_real_protocols() -> None:
    # Dropping the optional drafter shift breaks callers that pass it.
    def hook(request: Any, computed: int, new: int, budget: int, cache: Any) -> Any: ...

    problem = arity_problem(SchedulingHook.try_schedule_encoder_inputs, hook)
    assert problem is not None and "may pass 6" in problem
    assert arity_problem(Hasher.hash_item, _bound(lambda self, data, options=None: "")) is None


def test_an_adapters_own_folder_is_importable_but_never_a_package_of_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.loader import CHECKOUT_ROOT, make_siblings_importable

    monkeypatch.setattr(sys, "path", list(sys.path))
    make_siblings_importable(str(CHECKOUT_ROOT / "adapters" / "torch"))
    make_siblings_importable(str(CHECKOUT_ROOT / "adapters" / "zoo" / "hash_by_length.py"))
    assert str(CHECKOUT_ROOT / "adapters") not in sys.path  # would shadow the real torch
    assert str(CHECKOUT_ROOT / "adapters" / "zoo") not in sys.path
    student = tmp_path / "adapter.py"
    student.write_text("ADAPTER = None\n")
    make_siblings_importable(str(student))
    assert sys.path[-1] == str(tmp_path)  # after the checkout: it cannot shadow spec/


MISSING_REFERENCE = (
    "raise ModuleNotFoundError(\"No module named 'reference'\", name='reference')\n"
)


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader as in the wheel (``mmspec.*``), where ``reference`` is not a module."""
    from harness import names

    monkeypatch.setattr(names, "INSTALLED", True)
    monkeypatch.setattr(names, "PREFIX", "mmspec.")


def test_installed_a_zoo_entry_given_by_path_says_what_is_missing_and_where_it_runs(
    tmp_path: Path, installed: None
) -> None:
    # a checkout's zoo entry (the wheel carries no zoo) imports `reference`, which the
    # installed mmspec has as mmspec.reference: what happens when given by path (issue 33,
    # item 9)
    checkout = tmp_path / "checkout"
    for marker in ("spec/adapter.py", "harness/names.py"):
        (checkout / marker).parent.mkdir(parents=True)
        (checkout / marker).write_text("", encoding="utf-8")
    entry = checkout / "adapters" / "zoo" / "size_hash.py"
    entry.parent.mkdir(parents=True)
    entry.write_text(MISSING_REFERENCE, encoding="utf-8")
    (problem,) = problems_of(str(entry))
    assert "ModuleNotFoundError: No module named 'reference'" in problem, problem
    assert "`reference` is a checkout's name; the installed mmspec has it as " \
        "`mmspec.reference`: import that instead" in problem, problem
    assert (
        f"or run it from the checkout it lies in: cd {checkout} && PYTHONPATH=. "
        "python -m properties verify --adapter adapters/zoo/size_hash.py" in problem
    ), problem


def test_installed_an_adapter_outside_a_checkout_is_told_the_installed_name(
    tmp_path: Path, installed: None
) -> None:
    adapter = tmp_path / "mine.py"
    adapter.write_text(MISSING_REFERENCE, encoding="utf-8")
    (problem,) = problems_of(str(adapter))
    assert problem.endswith("has it as `mmspec.reference`: import that instead"), problem


def test_a_missing_module_not_of_ours_gets_no_hint(tmp_path: Path, installed: None) -> None:
    adapter = tmp_path / "needs_torch.py"
    adapter.write_text("import mmspec_no_such_dependency\n", encoding="utf-8")
    (problem,) = problems_of(str(adapter))
    assert "No module named 'mmspec_no_such_dependency'" in problem, problem
    assert "checkout's name" not in problem and "python -m properties" not in problem, problem


def test_in_the_checkout_a_missing_reference_gets_no_installed_hint(tmp_path: Path) -> None:
    adapter = tmp_path / "mine.py"
    adapter.write_text(MISSING_REFERENCE, encoding="utf-8")
    (problem,) = problems_of(str(adapter))
    assert "No module named 'reference'" in problem and "mmspec.reference" not in problem

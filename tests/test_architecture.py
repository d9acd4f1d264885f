"""The layering docs/architecture.md draws, checked on every import statement (function
bodies included): spec → reference → properties → exhaustive → harness → contracts,
with adapters beside them. A folder may import itself and the folders it is allowed
below; nothing imports upward (the checks of clauses never reach into the harness that
runs them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("spec", "reference", "properties", "exhaustive", "harness", "contracts", "adapters")

#: What each folder may import besides itself.
ALLOWED: dict[str, frozenset[str]] = {
    "spec": frozenset(),
    "reference": frozenset({"spec"}),
    "properties": frozenset({"spec"}),
    "exhaustive": frozenset({"spec", "properties"}),
    "harness": frozenset({"spec", "properties", "exhaustive"}),
    "contracts": frozenset({"spec", "properties", "harness"}),
    # the command line's entry point (``python -m mmspec``; installed, the package)
    "mmspec": frozenset({"spec", "harness"}),
}

#: ``python -m properties`` stays a command: its entry point runs the harness's command
#: line, and no property module imports it.
ENTRY_POINTS = {ROOT / "properties" / "__main__.py"}


def _imported_roots(source: Path) -> set[str]:
    tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots & set(OURS)


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_no_folder_imports_above_its_layer(folder: str) -> None:
    allowed = ALLOWED[folder] | {folder}
    offending = {
        str(source.relative_to(ROOT)): sorted(_imported_roots(source) - allowed)
        for source in sorted((ROOT / folder).rglob("*.py"))
        if source not in ENTRY_POINTS and _imported_roots(source) - allowed
    }
    assert not offending, f"{folder}/ imports above its layer: {offending}"


def test_properties_holds_only_checks_of_clauses() -> None:
    """The harness's modules are not in properties/ any more (issue 18)."""
    harness_modules = {"loader", "runner", "catalog", "report", "baseline", "cli", "profiles",
                       "kill_matrix", "zoo", "sweep", "declared", "isolation", "grading",
                       "exhaustive", "contracts"}
    present = {p.stem for p in (ROOT / "properties").iterdir()}
    assert not present & harness_modules, sorted(present & harness_modules)

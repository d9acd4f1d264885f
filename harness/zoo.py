"""The bug zoo as data: every entry of ``adapters/zoo/``, what it breaks and replaces.

A zoo entry (``adapters/zoo/<name>.py``) is a deliberately buggy implementation that
declares ``BREAKS`` (the clause it violates), ``KILLED_BY`` (the property that must catch
it), ``ORIGIN`` (where the mistake comes from: a seed, an upstream version, a typical
student error, a library's semantics) and ``ADAPTER`` (providing only the buggy
component). The declarations are read from the module's source, so an entry whose
optional dependency (torch) is absent is still listed, with ``needs`` naming it; only
entries without ``needs`` can be run.

The zoo is loaded by name (``adapters.zoo.<name>``) like any other adapter: nothing here
imports ``reference/``.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from harness.names import HOME, PREFIX
from spec.adapter import COMPONENTS

#: The zoo's folder and package.
ZOO_DIR = HOME / "adapters" / "zoo"  # a checkout's only: no wheel carries the zoo
ZOO_PACKAGE = PREFIX + "adapters.zoo"

#: Import roots of this checkout: a zoo module failing to import one of these is broken;
#: failing to import anything else means an optional dependency (torch) is absent.
OUR_PACKAGES = frozenset(
    {"adapters", "contracts", "exhaustive", "harness", "properties", "reference", "spec", "tests"}
)

_COMPONENT_NAMES = frozenset(name for name, _ in COMPONENTS)


class ZooDeclarationError(ValueError):
    """A zoo module lacks a declaration, or its ADAPTER is not ``Adapter(...)``."""


@dataclass(frozen=True)
class ZooEntry:
    module: str
    breaks: str
    killed_by: str
    #: Where the mistake comes from: a seed, an upstream version, a typical error.
    origin: str
    #: The Adapter fields the entry fills: the components it replaces.
    components: tuple[str, ...] = ()
    #: An optional dependency this machine lacks (the entry is then read, not run).
    needs: str | None = None

    @property
    def short_name(self) -> str:
        return self.module.rsplit(".", 1)[1]


def discover() -> list[ZooEntry]:
    """Every zoo entry, sorted by name."""
    names = sorted(p.stem for p in ZOO_DIR.glob("*.py") if p.stem != "__init__")
    return [_entry(name) for name in names]


def discover_named(
    names: Sequence[str] | None, error: Callable[[str], NoReturn]
) -> list[ZooEntry]:
    """The entries a command's ``--entry NAME ...`` picks (every entry without it); an
    unknown name goes to ``error`` (the argument parser's, which exits)."""
    entries = discover()
    if not names:
        return entries
    unknown = set(names) - {e.short_name for e in entries}
    if unknown:
        error(f"no zoo entry {', '.join(sorted(unknown))}")
    return [e for e in entries if e.short_name in names]


def _entry(name: str) -> ZooEntry:
    path = ZOO_DIR / f"{name}.py"
    declared, components = _declarations(path)
    missing = [d for d in ("BREAKS", "KILLED_BY", "ORIGIN") if d not in declared]
    if missing or not components:
        what = missing + ([] if components else ["ADAPTER = Adapter(...) with a component"])
        raise ZooDeclarationError(f"{path}: missing {', '.join(what)}")
    module = f"{ZOO_PACKAGE}.{name}"
    return ZooEntry(
        module,
        declared["BREAKS"],
        declared["KILLED_BY"],
        declared["ORIGIN"],
        components,
        needs=_missing_dependency(module),
    )


def _declarations(path: Path) -> tuple[dict[str, str], tuple[str, ...]]:
    """The module-level string constants of a zoo module, and the component keywords of
    its ``ADAPTER = Adapter(...)`` call, in ``spec.adapter.COMPONENTS`` order."""
    declared: dict[str, str] = {}
    keywords: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Name):
            continue
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            declared[target.id] = value.value
        elif target.id == "ADAPTER" and isinstance(value, ast.Call):
            keywords = {k.arg for k in value.keywords if k.arg is not None}
    ordered = tuple(name for name, _ in COMPONENTS if name in keywords & _COMPONENT_NAMES)
    return declared, ordered


def _missing_dependency(module: str) -> str | None:
    """The optional dependency the module cannot import, or None when it imports."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or e.name.split(".")[0] in OUR_PACKAGES:
            raise
        return e.name
    return None


def catalogue(entries: list[ZooEntry]) -> str:
    """docs/zoo.md: one table row per entry (``python -m harness.zoo`` prints it)."""
    lines = [
        "# The bug zoo",
        "",
        "Deliberately buggy implementations in `adapters/zoo/`, one mistake each, each",
        "replacing one component of the reference. Every entry is killed by the property it",
        "names, by a failed assertion of the clause it breaks: the first failure the `ci`",
        "profile's search finds (`tests/test_zoo.py`, which runs that search without the shrink:",
        "shrinking keeps each clause's failure a failure of that clause); `make test` also",
        "prints the kill matrix, every property against every entry it exercises (`python -m",
        "harness.kill_matrix`); `make time-to-catch`",
        "times each kill. Origins: *seed NNN* is a seed document of the course, *vLLM",
        "vX.Y.Z* or *SGLang vX.Y.Z* the upstream code that has the mistake, *typical student",
        "error* a mistake of a from-scratch build, *library semantics* a numpy/torch",
        "behaviour inherited unawares.",
        "",
        "Generated by `python -m harness.zoo > docs/zoo.md`; a test keeps it current.",
        "",
        "| entry | replaces | breaks | killed by | origin |",
        "|---|---|---|---|---|",
    ]
    for e in entries:
        origin = e.origin.replace("|", "\\|")
        lines.append(
            f"| `{e.short_name}` | {', '.join(e.components)} | {e.breaks} | "
            f"`{e.killed_by}` | {origin} |"
        )
    lines += ["", f"{len(entries)} entries.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    sys.stdout.write(catalogue(discover()))

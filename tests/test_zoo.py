"""Every zoo entry is killed by the property it names, by a failed clause assertion.

A zoo entry (``adapters/zoo/<name>.py``) is a deliberately buggy implementation that
declares ``BREAKS`` (the clause it violates), ``KILLED_BY`` (the property that must
catch it) and ``ADAPTER``. Running ``KILLED_BY`` against it in the ``ci`` profile must
give FAIL on ``BREAKS`` — a :class:`~properties.framework.ClauseViolation`, not an
exception escaping the adapter (that would be ERROR). And the reference must pass every
property that kills something, or the kill proves nothing.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import adapters.zoo
from properties.report import render
from properties.runner import Verdict, verify

#: Import roots of this checkout: a zoo module failing to import one of these is broken;
#: failing to import anything else means an optional dependency (torch) is absent.
OUR_PACKAGES = {"adapters", "properties", "reference", "spec", "tests"}


@dataclass(frozen=True)
class ZooEntry:
    module: str
    breaks: str
    killed_by: str
    #: An optional dependency this machine lacks (the entry is then read, not run).
    needs: str | None = None

    @property
    def short_name(self) -> str:
        return self.module.rsplit(".", 1)[1]


def discover() -> list[ZooEntry]:
    """Every module of ``adapters/zoo/`` that declares BREAKS, KILLED_BY and ADAPTER. A
    module needing an absent optional dependency (torch) is read for its declarations
    without being imported."""
    entries: list[ZooEntry] = []
    for info in sorted(pkgutil.iter_modules(adapters.zoo.__path__), key=lambda i: i.name):
        name = f"adapters.zoo.{info.name}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is None or e.name.split(".")[0] in OUR_PACKAGES:
                raise
            declared = _declarations(Path(adapters.zoo.__path__[0]), info.name)
            if {"BREAKS", "KILLED_BY", "ADAPTER"} <= declared.keys():
                entries.append(
                    ZooEntry(name, declared["BREAKS"], declared["KILLED_BY"], needs=e.name)
                )
            continue
        if all(hasattr(module, a) for a in ("BREAKS", "KILLED_BY", "ADAPTER")):
            entries.append(ZooEntry(name, module.BREAKS, module.KILLED_BY))
    return entries


def _declarations(folder: Path, name: str) -> dict[str, str]:
    """Module-level ``NAME = ...`` assignments of a zoo module's source (string values
    as written; other values as ``"..."``)."""
    path = folder / f"{name}.py"
    if not path.is_file():
        path = folder / name / "__init__.py"
    declared: dict[str, str] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                value = node.value
                text = value.value if isinstance(value, ast.Constant) else "..."
                declared[target.id] = str(text)
    return declared


ENTRIES = discover()
RUNNABLE = [e for e in ENTRIES if e.needs is None]


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(
            e,
            id=e.short_name,
            marks=[pytest.mark.skip(reason=f"needs {e.needs}, not installed")] if e.needs else [],
        )
        for e in ENTRIES
    ],
)
def test_zoo_entry_is_killed_by_its_property(entry: ZooEntry) -> None:
    report = verify(entry.module, "ci", only=[entry.killed_by])
    rows = [r for r in report.rows if r.property == entry.killed_by]
    assert rows, f"{entry.module}: KILLED_BY names {entry.killed_by}, which is not registered"
    verdicts = {r.clause: r.verdict for r in rows}
    assert entry.breaks in verdicts, (
        f"{entry.module}: {entry.killed_by} does not check {entry.breaks} "
        f"(it checks {', '.join(verdicts)})"
    )
    assert verdicts[entry.breaks] is Verdict.FAIL, render(report)
    result = report.results[entry.killed_by]
    assert any(f.clause == entry.breaks for f in result.failures), render(report)


def test_the_reference_passes_every_property_that_kills() -> None:
    killers = sorted({e.killed_by for e in RUNNABLE})
    if not killers:
        pytest.fail("adapters/zoo/ has no entries")
    report = verify("reference", "ci", only=killers)
    assert report.ok, render(report)
    assert {r.verdict for r in report.rows} == {Verdict.PASS}, render(report)

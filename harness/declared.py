"""The findings declared for a pinned vLLM release, and their classes (issue 14).

``adapters/vllm/expected/<version>.json`` declares, for one release, the verdict of every
row that is neither ``pass`` nor ``not provided`` and the finding behind it
(docs/findings.md), and classes each finding from the engine's point of view:

- ``defect``: reachable through the engine's own callers, with an effect a user sees;
- ``hazard``: the component breaks its contract, but no caller in that release reaches
  it, or none with an effect a user sees (``why`` names the guard).

(A *withdrawn* finding has no row: its clause was fixed, and the release passes it.)

``verify --vllm VERSION`` (and ``--vllm-src`` of a tree whose version is declared) then
exits non-zero only for a defect that stands or for a row that differs from the
declaration; hazards are printed in their own section and leave a clean release green.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from harness import names
from harness.runner import ACCEPTED, Report

EXPECTED_DIR = names.HOME / "adapters" / "vllm" / "expected"
CLASSES = ("defect", "hazard")
#: The environment variables naming the processor cache pair behind the vLLM adapter's
#: ``item_cache`` (``lru``, ``shm``: adapters/vllm/item_cache*.py) and the model runner
#: whose code is behind its ``worker_store`` (``v1``, ``GPUModelRunner``:
#: adapters/vllm/runner.py; ``v2``, model runner V2's ``EncoderCache``:
#: adapters/vllm/runner_v2.py).
PROCESSOR_CACHE_VARIABLE, MODEL_RUNNER_VARIABLE = names.CODE_SELECTING_VARIABLES
#: Each variable that puts other vLLM code behind a component, with its default. A
#: declaration file declares the rows of each other value (a *variant*, named by the
#: value: ``shm``, ``v2``) under ``"variants"``; one variant runs at a time.
VARIANT_VARIABLES: dict[str, str] = {PROCESSOR_CACHE_VARIABLE: "lru", MODEL_RUNNER_VARIABLE: "v1"}
#: The variant of a run with every variable at its default.
DEFAULT_VARIANT = "default"


@dataclass(frozen=True)
class Declaration:
    version: str
    #: (clause, property) -> (verdict, finding id)
    rows: dict[tuple[str, str], tuple[str, str]]
    #: finding id -> (class, why)
    findings: dict[str, tuple[str, str]]


class DeclarationError(ValueError):
    """A declaration file that is malformed (a finding without a class, say)."""


def setting(variable: str) -> str:
    """The value of one of :data:`VARIANT_VARIABLES` (its default when unset or empty)."""
    return os.environ.get(variable, "") or VARIANT_VARIABLES[variable]


def variant_environment(variant: str) -> dict[str, str]:
    """The environment that runs ``variant`` (empty for the default): the variable whose
    value it is. Raises :class:`DeclarationError` for a name no variable takes."""
    if variant == DEFAULT_VARIANT:
        return {}
    for variable, default in VARIANT_VARIABLES.items():
        if variant in _VALUES[variable] and variant != default:
            return {variable: variant}
    raise DeclarationError(f"no variable selects a variant named {variant!r}")


#: The values each variable takes (adapters/vllm/__init__.py checks them before vLLM loads).
_VALUES: dict[str, tuple[str, ...]] = {
    PROCESSOR_CACHE_VARIABLE: ("lru", "shm"),
    MODEL_RUNNER_VARIABLE: ("v1", "v2"),
}


def active_variant() -> str:
    """The variant the environment runs: the one variable set to another value than its
    default names it; :data:`DEFAULT_VARIANT` when none is. Two at once is refused: the
    declarations hold each variant's rows against the release's defaults."""
    chosen = {v: setting(v) for v, default in VARIANT_VARIABLES.items() if setting(v) != default}
    if len(chosen) > 1:
        raise DeclarationError(
            "one variant at a time: "
            + " and ".join(f"{variable}={value}" for variable, value in chosen.items())
        )
    return next(iter(chosen.values()), DEFAULT_VARIANT)


def _rows(entries: Any) -> dict[tuple[str, str], tuple[str, str]]:
    return {
        (str(r["clause"]), str(r["property"])): (str(r["verdict"]), str(r["finding"]))
        for r in entries
    }


def variant_rows(
    data: Any, variant: str, path: object
) -> dict[tuple[str, str], tuple[str, str]]:
    """A declaration file's rows for ``variant``: the release's rows, with those of the
    properties the variant declares (``"variants"``) replaced by its own."""
    rows = _rows(data["expected"])
    if variant == DEFAULT_VARIANT:
        return rows
    declared: Any = data.get("variants", {}).get(variant)
    if declared is None:
        selected = " ".join(f"{k}={v}" for k, v in variant_environment(variant).items())
        raise DeclarationError(f"{path}: no rows declared for {selected}")
    replaced = {str(p) for p in declared["properties"]}
    kept = {key: row for key, row in rows.items() if key[1] not in replaced}
    return {**kept, **_rows(declared["expected"])}


def load_declaration(version: str, variant: str | None = None) -> Declaration | None:
    """The declaration of ``version`` for ``variant`` (the one the environment runs when
    None), or None when the release is not pinned."""
    path = EXPECTED_DIR / f"{version}.json"
    if not path.is_file():
        return None
    data: Any = json.loads(path.read_text(encoding="utf-8"))
    rows = variant_rows(data, variant or active_variant(), path)
    findings = {
        str(k): (str(v["class"]), str(v.get("why", "")))
        for k, v in data.get("findings", {}).items()
    }
    unclassed = sorted({f for _, f in rows.values()} - set(findings))
    bad = sorted(f for f, (c, _) in findings.items() if c not in CLASSES)
    if unclassed or bad:
        raise DeclarationError(
            f"{path}: findings without a class {unclassed}, with an unknown class {bad} "
            f"(one of {', '.join(CLASSES)})"
        )
    return Declaration(str(data["version"]), rows, findings)


def release_of(report: Report) -> str | None:
    """The vLLM version an adapter name like ``vllm 0.33.0 (source tree ...)`` names."""
    match = re.match(r"vllm (\d+\.\d+\.\d+)\b(?![.+\w])", report.adapter_name)
    return match.group(1) if match else None


def judge(
    report: Report, declaration: Declaration, partial: bool = False
) -> tuple[list[str], bool]:
    """The section to print and whether the run is clean: every row as declared, and
    no defect standing. ``partial`` (``--only``): declared rows the run did not include
    are not missing."""
    differs: list[str] = []
    by_class: dict[str, list[str]] = {c: [] for c in CLASSES}
    seen = set()
    for row in report.rows:
        key = (row.clause, row.property)
        seen.add(key)
        declared = declaration.rows.get(key)
        if declared is None:
            if row.verdict not in ACCEPTED:
                differs.append(f"NEW {row.verdict.value}: {row.clause} {row.property}")
            continue
        verdict, finding = declared
        if verdict != row.verdict.value:
            differs.append(
                f"{row.clause} {row.property}: {row.verdict.value}, declared {verdict} "
                f"({finding})"
            )
            continue
        kind, why = declaration.findings[finding]
        by_class[kind].append(f"{finding} {row.clause} {row.property} {verdict}: {why}")
    differs += [
        f"{c} {p}: declared {v} ({f}) but not in the run"
        for (c, p), (v, f) in declaration.rows.items()
        if (c, p) not in seen and not partial
    ]
    lines = [f"== declared findings of vLLM {declaration.version} (docs/findings.md) =="]
    for kind in CLASSES:
        lines.append(f"{kind}s: {len(by_class[kind])} rows")
        lines += [f"  {entry}" for entry in by_class[kind]]
    if differs:
        lines.append(f"differs from adapters/vllm/expected/{declaration.version}.json:")
        lines += [f"  {entry}" for entry in differs]
    clean = not differs and not by_class["defect"]
    lines.append(
        "verdict: " + ("clean (hazards only)" if clean else
                       "defects stand" if not differs else "differs from the declaration")
    )
    return lines, clean

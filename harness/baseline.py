"""Saved verdicts and the difference between two runs: "what did my change break or fix".

``python -m properties verify ... --save-report FILE`` writes the run's verdicts as JSON
(:func:`save_verdicts`): one entry per clause row, with the failure messages, and the
implementation behind each component. ``--baseline`` compares the run with a baseline
and prints only the rows whose verdict differs (:func:`render_differences`). A baseline
is a saved report, or — for the vLLM adapter — a vLLM version or source tree, which is
verified first in a process of its own (two vLLM trees cannot share one process).

A row is keyed by ``(clause, property)``. A change is *fixed* when the baseline's verdict
was not accepted (``FAIL``, ``ERROR``, ``VACUOUS``, ``blocked``, ``missing property``) and
the new one is; *broke* the other way round; *changed* otherwise (``FAIL`` -> ``blocked``,
``pass`` -> ``not provided``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import names
from harness.ci_output import failures
from harness.runner import ACCEPTED, Report, Verdict

SCHEMA = "mmspec-verdicts/1"

#: ``$MMSPEC_VLLM_SRC`` names the vLLM source tree the vLLM adapter imports.
VLLM_SOURCE_ENV = "MMSPEC_VLLM_SRC"

_ACCEPTED_VALUES = frozenset(v.value for v in ACCEPTED)
_VERSION = re.compile(r"^\d+\.\d+\.\d+([.-]?(post|rc|dev)\d+)?$")


class BaselineError(RuntimeError):
    """The baseline cannot be read or run."""


@dataclass(frozen=True)
class SavedRow:
    clause: str
    property: str
    verdict: str
    #: The failure messages of the row's property for this clause (or its errors).
    messages: tuple[str, ...] = ()


@dataclass(frozen=True)
class SavedVerdicts:
    """What one run found, as saved: enough to compare two runs."""

    adapter: str
    profile: str
    components: Mapping[str, str]
    rows: tuple[SavedRow, ...]

    def by_key(self) -> dict[tuple[str, str], SavedRow]:
        return {(row.clause, row.property): row for row in self.rows}


# --- saving and loading -----------------------------------------------------------------


def verdicts_of(report: Report) -> SavedVerdicts:
    rows = []
    for row in report.rows:
        result = report.results.get(row.property)
        messages: tuple[str, ...] = ()
        if result is not None:
            messages = tuple(
                f.message
                for f in result.failures
                if f.clause == row.clause or f.verdict is Verdict.ERROR
            )
            if result.verdict is Verdict.VACUOUS:
                messages = (result.detail,)
        rows.append(SavedRow(row.clause, row.property, row.verdict.value, messages))
    return SavedVerdicts(
        adapter=report.adapter_name,
        profile=report.profile,
        components=dict(report.provenance),
        rows=tuple(rows),
    )


def save_verdicts(
    report: Report, path: str | os.PathLike[str], replay_options: str = ""
) -> None:
    """The verdicts (what ``--baseline REPORT`` compares), each failing row with its
    failures as data (:func:`harness.ci_output.failures`)."""
    saved = verdicts_of(report)
    behind = {(row.clause, row.property): failures(report, row, replay_options)
              for row in report.rows}
    data = {
        "schema": SCHEMA,
        "adapter": saved.adapter,
        "profile": saved.profile,
        "components": dict(saved.components),
        "rows": [
            {
                "clause": row.clause,
                "property": row.property,
                "verdict": row.verdict,
                "messages": list(row.messages),
                "failures": behind.get((row.clause, row.property), []),
            }
            for row in saved.rows
        ],
    }
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def load_verdicts(path: str | os.PathLike[str]) -> SavedVerdicts:
    try:
        data: Any = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BaselineError(f"cannot read the saved report {path}: {e}") from e
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise BaselineError(
            f"{path} is not a saved report ({SCHEMA}); write one with --save-report"
        )
    rows = tuple(
        SavedRow(
            clause=str(row["clause"]),
            property=str(row["property"]),
            verdict=str(row["verdict"]),
            messages=tuple(str(m) for m in row.get("messages", ())),
        )
        for row in data["rows"]
    )
    return SavedVerdicts(
        adapter=str(data["adapter"]),
        profile=str(data["profile"]),
        components={str(k): str(v) for k, v in data.get("components", {}).items()},
        rows=rows,
    )


# --- obtaining a baseline ---------------------------------------------------------------


def is_vllm_version(text: str) -> bool:
    return bool(_VERSION.match(text))


def fetch_vllm(version: str) -> str:
    """The unpacked source tree of vLLM ``version`` (``adapters/vllm/fetch.py`` runs as a
    script in a process of its own: nothing of the adapters is imported here)."""
    script = names.HOME / "adapters" / "vllm" / "fetch.py"
    completed = subprocess.run(
        [sys.executable, str(script), version],
        check=False,
        stdout=subprocess.PIPE,
        text=True,
        cwd=_child_cwd(),
        env=_child_env(),
    )
    tree = completed.stdout.strip().splitlines()[-1:] if completed.stdout else []
    if completed.returncode != 0 or not tree:
        raise BaselineError(f"fetching vLLM {version} failed (exit {completed.returncode})")
    return tree[0]


def baseline_verdicts(
    baseline: str, adapter: str, profile: str, only: Sequence[str] | None
) -> SavedVerdicts:
    """The baseline's verdicts: a saved report is read; a vLLM version or source tree is
    verified in a child process with the same adapter, profile and selection."""
    path = Path(baseline)
    if path.is_file():
        return load_verdicts(path)
    if is_vllm_version(baseline):
        tree = fetch_vllm(baseline)
    elif path.is_dir():
        tree = str(path.resolve())
    else:
        raise BaselineError(
            f"--baseline {baseline}: not a saved report, a vLLM version or a source tree"
        )
    with tempfile.TemporaryDirectory(prefix="mmspec-baseline-") as scratch:
        saved = Path(scratch) / "baseline.json"
        command = [
            sys.executable, "-m", names.MAIN, "verify", "--adapter", adapter,
            "--profile", profile, "--vllm-src", tree, "--save-report", str(saved),
        ]
        if only:
            command += ["--only", *only]
        print(f"baseline: verifying {tree} ...", file=sys.stderr, flush=True)
        completed = subprocess.run(
            command, check=False, stdout=subprocess.DEVNULL, cwd=_child_cwd(),
            env=_child_env(),
        )
        if completed.returncode not in (0, 1) or not saved.is_file():
            raise BaselineError(
                f"verifying the baseline {tree} failed (exit {completed.returncode})"
            )
        return load_verdicts(saved)


def _child_cwd() -> str | None:
    """Where the child runs: the checkout's root (as ``make`` runs), or, installed, the
    caller's own folder (a relative adapter path means what it means there)."""
    return None if names.INSTALLED else str(names.HOME)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop(VLLM_SOURCE_ENV, None)
    root = str(names.IMPORT_ROOT)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


# --- the difference ---------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    clause: str
    property: str
    before: str  # "—" when the row is new
    after: str  # "—" when the row is gone
    kind: str  # "fixed", "broke", "changed"
    messages: tuple[str, ...]


def differences(baseline: SavedVerdicts, current: SavedVerdicts) -> list[Difference]:
    """The rows whose verdict differs, in the current run's order (rows only the
    baseline has last)."""
    before = baseline.by_key()
    after = current.by_key()
    keys = list(after) + [k for k in before if k not in after]
    found = []
    for key in keys:
        old = before[key].verdict if key in before else "—"
        new = after[key].verdict if key in after else "—"
        if old == new:
            continue
        old_ok, new_ok = old in _ACCEPTED_VALUES, new in _ACCEPTED_VALUES
        # A new FAIL or ERROR is worse whatever the baseline had, FAIL <-> ERROR included
        # (issue 14: the tree under test now fails differently; the gate must see it).
        worse = new != "—" and (_badness(new) > _badness(old) or new in ("FAIL", "ERROR"))
        kind = "broke" if worse else "fixed" if new_ok and not old_ok and new != "—" else "changed"
        messages = after[key].messages if key in after and not new_ok else ()
        found.append(Difference(key[0], key[1], old, new, kind, messages))
    return found


def _badness(verdict: str) -> int:
    """How bad a row's verdict is: accepted (or no row yet) 0; no verdict on the clause (blocked,
    VACUOUS, a missing property) 1; a failure or an error 2. A row whose badness rises
    broke — ``blocked`` to ``FAIL`` included (issue 14: per-clause verdicts turn a
    regression hidden behind another failure into a FAIL, and the gate must see it)."""
    if verdict in _ACCEPTED_VALUES or verdict == "—":  # "—": the row is new
        return 0
    return 2 if verdict in ("FAIL", "ERROR") else 1


def render_differences(baseline: SavedVerdicts, current: SavedVerdicts) -> str:
    """The rows whose verdict differs, with the new failures' messages, and a summary."""
    found = differences(baseline, current)
    lines = [f"baseline:   {baseline.adapter} (profile {baseline.profile})"]
    lines.append(f"under test: {current.adapter} (profile {current.profile})")
    if baseline.profile != current.profile:
        lines.append("warning: the profiles differ; verdicts may differ for that reason alone")
    changed_components = sorted(
        c
        for c in set(baseline.components) | set(current.components)
        if _owner_kind(baseline.components.get(c)) != _owner_kind(current.components.get(c))
    )
    if changed_components:
        lines.append(f"components provided differently: {', '.join(changed_components)}")
    lines.append("")
    if not found:
        lines.append(f"no verdict differs ({len(current.rows)} clause rows compared)")
        return "\n".join(lines) + "\n"
    headers = ("clause", "property", "baseline", "now", "change")
    cells = [(d.clause, d.property, d.before, d.after, d.kind) for d in found]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for d, row in zip(found, cells, strict=True):
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        lines += [f"      {message}" for message in d.messages]
    counts = {kind: sum(d.kind == kind for d in found) for kind in ("broke", "fixed", "changed")}
    summary = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
    lines += ["", f"{len(found)} of {len(current.rows)} clause rows differ: {summary}"]
    return "\n".join(lines) + "\n"


def any_broke(baseline: SavedVerdicts, current: SavedVerdicts) -> bool:
    return any(d.kind == "broke" for d in differences(baseline, current))


def _owner_kind(owner: str | None) -> str:
    """Who provides a component, without the version: "reference", "not provided", or
    the adapter (any other name)."""
    if owner in (None, "reference", "not provided"):
        return str(owner)
    return "adapter"

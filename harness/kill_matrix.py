"""The kill matrix: which property catches which zoo entry (docs/zoo.md).

For every zoo entry, every property that exercises a component the entry replaces (its
``subject`` or ``uses`` meets the entry's ADAPTER fields) runs against it under the
``mutation`` profile: derandomized and without shrinking, since a kill only has to
happen, not be explained (``tests/test_zoo.py`` checks that each entry's named kill is
the first failure of ``ci``'s search, on the clause it breaks). Each cell is one of

- ``K`` the entry's own KILLED_BY failed on a clause assertion, ``k`` another property did;
- ``E`` an exception escaped the implementation (ERROR): no clause verdict;
- ``V`` the property passed without exercising what it claims (VACUOUS);
- ``.`` the property passed: this bug is invisible to it;
- blank: the property does not exercise the replaced component (not run).

The matrix fails (exit status 1) when an entry survives, when an entry is killed only
by exceptions (never by a clause assertion), when an entry's KILLED_BY does not kill it,
or when a property kills nothing. Entries whose optional dependency (torch) is absent
are listed and skipped.

    python -m harness.kill_matrix [--jobs N] [--entry NAME ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from harness.catalog import registered_properties
from harness.runner import Verdict, verify
from harness.zoo import ZooEntry, discover_named
from properties.framework import PropertySpec

PROFILE = "mutation"

KILLED_BY_OWN = "K"
KILLED_BY_OTHER = "k"
_MARK: dict[Verdict, str] = {
    Verdict.PASS: ".",
    Verdict.ERROR: "E",
    Verdict.VACUOUS: "V",
    Verdict.NOT_PROVIDED: "-",
}


def exercising(entry: ZooEntry, registry: Mapping[str, PropertySpec]) -> list[str]:
    """The properties that exercise a component the entry replaces, registry order."""
    replaced = set(entry.components)
    return [
        name
        for name, spec in registry.items()
        if replaced & {*spec.subject, *spec.uses}
    ]


@dataclass(frozen=True)
class Row:
    """One entry's verdicts: property name -> cell mark, plus why each E happened."""

    entry: ZooEntry
    cells: dict[str, str]
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def killed(self) -> bool:
        return any(m in (KILLED_BY_OWN, KILLED_BY_OTHER) for m in self.cells.values())

    @property
    def outcome(self) -> str:
        if self.killed:
            return "killed"
        if "E" in self.cells.values():
            return "killed only by an exception"
        return "survived"


def cell_mark(entry: ZooEntry, name: str, verdict: Verdict) -> str:
    """The matrix's mark for property ``name``'s ``verdict`` on ``entry``."""
    if verdict is Verdict.FAIL:
        return KILLED_BY_OWN if name == entry.killed_by else KILLED_BY_OTHER
    return _MARK.get(verdict, "?")


def run_entry(entry: ZooEntry) -> Row:
    """Run every property exercising the entry's components against it."""
    registry = registered_properties()
    names = exercising(entry, registry)
    started = time.perf_counter()
    report = verify(entry.module, PROFILE, only=names, per_clause=False)  # a kill is enough
    cells: dict[str, str] = {}
    errors: dict[str, str] = {}
    for name in names:
        result = report.results[name]
        cells[name] = cell_mark(entry, name, result.verdict)
        if result.verdict is Verdict.ERROR:
            errors[name] = result.failures[0].message if result.failures else result.detail
    return Row(entry, cells, errors, time.perf_counter() - started)


def compute(
    entries: Sequence[ZooEntry], jobs: int = 1, progress: Callable[[str], None] | None = None
) -> list[Row]:
    """One row per runnable entry (in the given order), ``jobs`` entries at a time;
    ``progress`` hears of each row as it is done (the matrix takes minutes)."""
    runnable = [e for e in entries if e.needs is None]
    say = progress or (lambda _line: None)
    rows: list[Row] = []

    def done(row: Row) -> Row:
        rows.append(row)
        say(f"[{len(rows)}/{len(runnable)}] {row.entry.short_name}: {row.outcome} "
            f"({row.seconds:.1f} s)")
        return row

    if jobs <= 1:
        return [done(run_entry(e)) for e in runnable]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return [done(row) for row in pool.map(run_entry, runnable)]


# --- judging -------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdicts:
    """What the matrix proves, and every way it falls short."""

    problems: tuple[str, ...]
    kills_by_property: dict[str, int]

    @property
    def ok(self) -> bool:
        return not self.problems


def judge(rows: Sequence[Row], registry: Mapping[str, PropertySpec]) -> Verdicts:
    problems: list[str] = []
    for row in rows:
        name = row.entry.short_name
        if row.outcome != "killed":
            problems.append(f"{name}: {row.outcome}")
        elif row.cells.get(row.entry.killed_by) != KILLED_BY_OWN:
            mark = row.cells.get(row.entry.killed_by, "not run")
            problems.append(
                f"{name}: its KILLED_BY {row.entry.killed_by} does not kill it ({mark})"
            )
    kills = {name: 0 for name in registry}
    for row in rows:
        for name, mark in row.cells.items():
            if mark in (KILLED_BY_OWN, KILLED_BY_OTHER):
                kills[name] += 1
    problems += [f"{name} kills no zoo entry" for name, n in kills.items() if n == 0]
    return Verdicts(tuple(problems), kills)


# --- rendering -----------------------------------------------------------------------


def column_labels(registry: Mapping[str, PropertySpec]) -> dict[str, str]:
    """A short label per property: its clause id, ``FAM*`` for a machine checking a whole
    family (``FAM*R`` for another of the family's machines: the capitals its name adds),
    with a/b/... where two properties check the same clause."""
    base: dict[str, str] = {}
    for name, spec in registry.items():
        families = {c.split("-")[0] for c in spec.clauses}
        if len(spec.clauses) == 1:
            base[name] = spec.clauses[0]
        elif len(families) == 1:
            base[name] = f"{families.pop()}*"
        else:
            base[name] = "+".join(sorted(families))
    labels: dict[str, str] = {}
    for name, label in base.items():
        same = [n for n, other in base.items() if other == label]
        if len(same) == 1:
            labels[name] = label
        elif label.endswith("*"):
            # machines of one family: the plainest keeps FAM*, the others add the
            # capitals their names add to it (EngineResetMachine: SYS*R)
            plain = min(same, key=len)
            extra = "".join(c for c in name if c.isupper() and c not in plain)
            labels[name] = label + extra
        else:
            labels[name] = label + "abcdefgh"[same.index(name)]
    return labels


def render(
    rows: Sequence[Row],
    skipped: Iterable[ZooEntry],
    registry: Mapping[str, PropertySpec],
    verdicts: Verdicts,
    seconds: float,
) -> str:
    """Blocks of entries replacing the same components, each with the columns of the
    properties that exercise them; then the legend, errors, summary and problems."""
    labels = column_labels(registry)
    lines = [f"kill matrix: zoo entries x properties ({PROFILE} profile: no shrinking)", ""]
    blocks: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        blocks.setdefault(row.entry.components, []).append(row)
    name_width = max((len(r.entry.short_name) for r in rows), default=10)
    for components, block in blocks.items():
        columns = [n for n in registry if any(n in r.cells for r in block)]
        widths = [max(len(labels[c]), 1) for c in columns]
        header = "  ".join(labels[c].ljust(w) for c, w in zip(columns, widths, strict=True))
        lines.append(f"{'+'.join(components).ljust(name_width)}  {header}")
        for row in block:
            cells = "  ".join(
                row.cells.get(c, " ").ljust(w) for c, w in zip(columns, widths, strict=True)
            )
            lines.append(f"{row.entry.short_name.ljust(name_width)}  {cells}".rstrip())
        lines.append("")
    shared = sorted({labels[n] for n in registry if labels[n] != _single_clause(registry[n])})
    legend = [f"{lab} = {n}" for lab in shared for n in registry if labels[n] == lab]
    if legend:
        lines += ["columns: " + "; ".join(legend), ""]
    lines.append(
        "K killed by its KILLED_BY, k killed by another property (both: a failed clause "
        "assertion), E exception escaped, V vacuous, . passed, blank not run"
    )
    for row in rows:
        for name, message in row.errors.items():
            lines.append(f"E {row.entry.short_name} x {name}: {message}")
    for entry in skipped:
        lines.append(f"skipped {entry.short_name}: needs {entry.needs}, not installed")
    killed = sum(r.killed for r in rows)
    n_cells = sum(len(r.cells) for r in rows)
    kills = sum(m in (KILLED_BY_OWN, KILLED_BY_OTHER) for r in rows for m in r.cells.values())
    lines += [
        "",
        f"{len(rows)} entries run, {killed} killed by a clause assertion; "
        f"{kills} kills in {n_cells} cells; every property kills "
        f"{min(verdicts.kills_by_property.values(), default=0)} to "
        f"{max(verdicts.kills_by_property.values(), default=0)} entries; {seconds:.1f} s",
    ]
    if verdicts.problems:
        lines += ["", "FAILED:"] + [f"  {p}" for p in verdicts.problems]
    else:
        lines.append("OK: every entry is killed by a clause assertion; every property kills")
    return "\n".join(lines) + "\n"


def _single_clause(spec: PropertySpec) -> str | None:
    return spec.clauses[0] if len(spec.clauses) == 1 else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.kill_matrix")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="entries run in parallel"
    )
    parser.add_argument(
        "--entry", nargs="+", metavar="NAME", help="only these entries (no property check)"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    entries = discover_named(args.entry, parser.error)
    registry = registered_properties()
    rows = compute(entries, args.jobs, progress=_stderr)
    verdicts = judge(rows, registry)
    if args.entry:  # a partial matrix cannot show that every property kills
        problems = tuple(p for p in verdicts.problems if not p.endswith("kills no zoo entry"))
        verdicts = Verdicts(problems, verdicts.kills_by_property)
    skipped = [e for e in entries if e.needs is not None]
    sys.stdout.write(render(rows, skipped, registry, verdicts, time.perf_counter() - started))
    return 0 if verdicts.ok else 1


def _stderr(line: str) -> None:
    print(f"[kill-matrix] {line}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())

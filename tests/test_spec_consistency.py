"""SPEC.md, the property registry and the zoo agree with each other, so that no clause
can be silently left unchecked and no property can claim a clause that does not exist."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from harness.catalog import registered_properties
from harness.loader import build_parts, load_adapter
from spec.clauses import load_clauses, load_transition_judges, load_transitions
from tests.test_zoo import ENTRIES

ROOT = Path(__file__).resolve().parents[1]
#: The families the zoo must cover (later families must be covered too, see below).
REQUIRED_FAMILIES = {"EXP", "HASH", "ENC", "ECM", "SPL", "SCH"}


def test_every_clause_names_registered_properties() -> None:
    registry = registered_properties()
    for clause in load_clauses().values():
        assert clause.checked_by, f"{clause.id} names no property"
        for name in clause.checked_by:
            assert name in registry, f"{clause.id} names {name}, which is not registered"
            assert clause.id in registry[name].clauses, (
                f"{clause.id} names {name}, but {name} declares {registry[name].clauses}"
            )


def test_every_property_names_existing_clauses() -> None:
    clauses = load_clauses()
    for spec in registered_properties().values():
        assert spec.clauses, f"{spec.name} declares no clause"
        for clause_id in spec.clauses:
            assert clause_id in clauses, f"{spec.name} declares {clause_id}, not in SPEC.md"
            assert spec.name in clauses[clause_id].checked_by, (
                f"{spec.name} declares {clause_id}, but SPEC.md does not list it there"
            )


def test_every_declared_machine_is_a_registered_property() -> None:
    reference = load_adapter("reference").adapter
    parts = build_parts(reference, reference)
    machines = {
        runnable.machine_name
        for spec in registered_properties().values()
        if (runnable := spec.build(parts)).machine_name is not None
    }
    declared = load_transitions()
    assert set(declared) <= machines, (
        f"SPEC.md declares unknown machines {set(declared) - machines}"
    )
    assert machines <= set(declared), f"{sorted(machines - set(declared))} declare no transitions"
    assert all(declared.values()), "a machine's transition list is empty"


def test_every_transition_judges_clauses_of_its_machine() -> None:
    """SPEC.md's "judges ..." per transition (per-clause coverage on runs with clauses
    set aside): every declared transition names at least one clause, each a clause of
    the machine's own property."""
    registry = registered_properties()
    judges = load_transition_judges()
    for machine, transitions in load_transitions().items():
        assert set(judges[machine]) == set(transitions), (machine, judges[machine])
        own = set(registry[machine].clauses)
        for transition, clauses in judges[machine].items():
            assert clauses and set(clauses) <= own, (machine, transition, clauses)


def test_every_clause_family_has_a_zoo_entry() -> None:
    families = {clause.family for clause in load_clauses().values()}
    assert REQUIRED_FAMILIES <= families
    broken = {e.breaks.split("-")[0] for e in ENTRIES}
    assert families <= broken, f"no zoo entry breaks a clause of {sorted(families - broken)}"


def test_every_zoo_entry_names_a_clause_and_its_property() -> None:
    clauses = load_clauses()
    registry = registered_properties()
    assert ENTRIES, "adapters/zoo/ has no entries"
    for entry in ENTRIES:
        assert entry.breaks in clauses, f"{entry.module}: BREAKS {entry.breaks} is not a clause"
        assert entry.killed_by in registry, f"{entry.module}: {entry.killed_by} not registered"
        assert entry.breaks in registry[entry.killed_by].clauses, (
            f"{entry.module}: {entry.killed_by} does not check {entry.breaks}"
        )


#: How a zoo entry's ORIGIN starts: the seed article, the upstream version (vLLM or SGLang)
#: whose code has the mistake, a typical error of a student build, or a library's
#: semantics inherited.
ORIGIN_FORMS = re.compile(
    r"(seed \d{3} |(vLLM|SGLang) v\d+\.\d+\.\d+ |typical student error: |library semantics: )\S"
)


def test_every_zoo_entry_says_what_it_breaks_and_where_the_mistake_comes_from() -> None:
    for entry in ENTRIES:
        assert ORIGIN_FORMS.match(entry.origin), (
            f"{entry.module}: ORIGIN must start with 'seed NNN', 'vLLM vX.Y.Z', 'SGLang "
            f"vX.Y.Z', 'typical student error:' or 'library semantics:', got {entry.origin!r}"
        )
        source = ROOT / "adapters" / "zoo" / f"{entry.short_name}.py"
        docstring = ast.get_docstring(ast.parse(source.read_text(encoding="utf-8"))) or ""
        assert f"({entry.breaks})" in docstring, (
            f"{entry.module}: the docstring must cite the clause it breaks, ({entry.breaks})"
        )


def test_every_property_is_named_killer_of_a_zoo_entry() -> None:
    """A property that kills nothing cannot be shown to fail (the standards' honesty
    rule); tests/test_zoo.py runs each declared kill."""
    killers = {entry.killed_by for entry in ENTRIES}
    idle = sorted(set(registered_properties()) - killers)
    assert not idle, f"properties no zoo entry names as its killer: {idle}"


def test_pyproject_ranges_start_at_the_pinned_versions() -> None:
    """The distribution's runtime requirements are ranges (issue 21) starting at the
    versions requirements.txt pins — what `make` and CI test; the dev extra stays pinned
    as requirements.txt pins it; requirements.txt pins nothing else but the setuptools
    the wheel is built with offline (tests/test_wheel.py)."""
    pins = dict(
        line.strip().split("==")
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    ranged = [*project["dependencies"], *project["optional-dependencies"]["redis"]]
    named: set[str] = set()
    for requirement in ranged:
        match = re.fullmatch(r"([\w-]+)>=([\w.]+)", requirement)
        assert match, f"{requirement}: a lower bound only (no upper bound without a known break)"
        assert pins[match[1]] == match[2], f"{requirement}: requirements.txt tests {pins[match[1]]}"
        named.add(match[1])
    for requirement in project["optional-dependencies"]["dev"]:
        name, _, version = requirement.partition("==")
        assert pins.get(name) == version, requirement
        named.add(name)
    assert set(pins) - named == {"setuptools"}


def test_every_outcome_the_scheduling_model_names_is_defined_in_spec() -> None:
    """Each outcome the SCH oracle distinguishes is defined in SPEC.md's SCH section
    (issue 19: a rule the grader enforces is written down), and SPEC.md defines no
    outcome the oracle does not know."""
    from typing import get_args

    from properties.models.scheduling import Outcome

    text = (ROOT / "spec/SPEC.md").read_text(encoding="utf-8")
    section = text[text.index("## SCH"):text.index("### SCH-1 ")]
    defined = set(re.findall(r"^\d+\. `(\w+)` —", section, flags=re.MULTILINE))
    named = set(get_args(Outcome))
    assert named - defined == set(), f"SPEC.md does not define {sorted(named - defined)}"
    assert defined - named == set(), f"the oracle does not know {sorted(defined - named)}"


#: What counts as a "mirrors" claim in reference/ and properties/models/: an upstream
#: class's member (``Scheduler.schedule``), or the first symbol after "Mirrors",
#: "mirrors", "vLLM's", "vLLM" or "vLLM vX.Y.Z".
UPSTREAM_MEMBER = re.compile(
    r"``((?:Scheduler|KVCacheManager|EncoderCacheManager|GPUModelRunner|Request|BlockPool|EngineCore"
    r"|PixtralHFEncoderInfo)\.\w+)(?:\(\))?``"
)
AFTER_CLAIM = re.compile(r"(?:Mirrors|mirrors|vLLM's|vLLM(?: v[\d.]+)?)\s+``([^`]+?)(?:\(\))?``")


def mirror_claims() -> dict[str, set[str]]:
    claims: dict[str, set[str]] = {}
    sources = [*(ROOT / "reference").glob("*.py"), *(ROOT / "properties" / "models").glob("*.py")]
    for path in sources:
        text = path.read_text(encoding="utf-8")
        for pattern in (UPSTREAM_MEMBER, AFTER_CLAIM):
            for match in pattern.finditer(text):
                claims.setdefault(match.group(1), set()).add(str(path.relative_to(ROOT)))
    return claims


def test_every_mirrors_claim_is_in_the_fidelity_table() -> None:
    """docs/engine.md's fidelity table has a row for every upstream symbol the reference
    or the models say they mirror, each with a verdict ("same", "differs: ...")."""
    docs = (ROOT / "docs" / "engine.md").read_text(encoding="utf-8")
    table = docs.split("## Fidelity table", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    claims = mirror_claims()
    assert len(claims) >= 15, sorted(claims)
    for symbol, files in sorted(claims.items()):
        row = next((r for r in rows if f"`{symbol}`" in r), None)
        assert row is not None, f"{symbol} (named in {sorted(files)}) has no fidelity row"
        verdict = row.rstrip(" |").rsplit("|", 1)[1].strip()
        assert verdict.startswith(("same", "differs", "not in 0.33.0")), row

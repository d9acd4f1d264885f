"""The mutation score of the properties over ``reference/`` (``make mutation``).

Reads the results ``mutmut run`` left in ``mutants/**/*.meta`` and prints the counts and
the kill rate. Counting rules (docs/mutation.md):

- *killed*: some property stopped passing (FAIL, ERROR or VACUOUS) on the mutant;
- *timeout*: the properties ran past mutmut's limit (30x their normal time): counted as
  detected, and listed, since a suite that never ends is a failed CI job;
- *survived* and *no tests* (no property reaches the mutated function) both count as
  survivors;
- *declared equivalent*: a surviving mutant named, with its reason, in the table of
  docs/mutation.md; left out of the denominator, and at most 5% of all mutants.

    kill rate = (killed + timeout) / (all - declared equivalent)

Exit status 1 when the rate is below 97%, the equivalents exceed 5%, or a declared
equivalent is not a survivor (a stale declaration).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "mutants"
DECLARATIONS = ROOT / "docs" / "mutation.md"
TARGET_RATE = 0.97
MAX_EQUIVALENT_SHARE = 0.05

#: mutmut 3's exit codes (mutmut.stats.status_by_exit_code), as this score counts them.
_STATUS = {
    1: "killed",
    3: "killed",  # pytest's internal error: a kill for mutmut too
    0: "survived",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    36: "timeout",
    24: "timeout",
    -24: "timeout",
    152: "timeout",
    255: "timeout",
    37: "caught by type check",
    -11: "segfault",
    -9: "segfault",
}
_DETECTED = {"killed", "timeout", "segfault"}
_DECLARED_ROW = re.compile(r"^\|\s*`(reference\.[^`\s]+__mutmut_\d+)`\s*\|")


def results() -> dict[str, str]:
    """mutant name -> status, for every mutant mutmut generated."""
    statuses: dict[str, str] = {}
    for meta in sorted(MUTANTS.rglob("*.meta")):
        data = json.loads(meta.read_text(encoding="utf-8"))
        for name, code in data.get("exit_code_by_key", {}).items():
            statuses[name] = "not checked" if code is None else _STATUS.get(code, "suspicious")
    return statuses


def declared_equivalent() -> set[str]:
    """The mutant names docs/mutation.md declares equivalent: the backticked name that
    opens a row of its table (``| `name` | reason |``). Names elsewhere in the text (the
    survivors answered by a property, the ones left open) declare nothing."""
    if not DECLARATIONS.is_file():
        return set()
    return {
        match.group(1)
        for line in DECLARATIONS.read_text(encoding="utf-8").splitlines()
        if (match := _DECLARED_ROW.match(line))
    }


def main() -> int:
    statuses = results()
    if not statuses:
        print("no mutmut results under mutants/: run `make mutation`", file=sys.stderr)
        return 1
    equivalent = declared_equivalent()
    counts = Counter(statuses.values())
    total = len(statuses)
    detected = sum(n for status, n in counts.items() if status in _DETECTED)
    survivors = sorted(n for n, s in statuses.items() if s not in _DETECTED)
    stale = sorted(equivalent - set(survivors))
    declared = set(survivors) & equivalent
    undeclared = [n for n in survivors if n not in equivalent]
    denominator = total - len(declared)
    rate = detected / denominator if denominator else 0.0
    share = len(declared) / total

    print(f"mutants of reference/: {total}")
    for status, n in counts.most_common():
        print(f"  {status}: {n}")
    print(f"declared equivalent (docs/mutation.md): {len(declared)} ({share:.1%} of all)")
    print(f"kill rate: {detected} / {denominator} = {rate:.2%} of non-equivalent mutants")
    if undeclared:
        print(f"survivors not declared equivalent ({len(undeclared)}; `mutmut show NAME`):")
        for name in undeclared:
            print(f"  {name}: {statuses[name]}")
    problems = []
    unchecked = counts.get("not checked", 0)
    if unchecked:
        checked = total - unchecked - len(declared)
        partial = detected / checked if checked else 0.0
        print(f"incomplete run: {unchecked} not checked; over the checked ones the rate is "
              f"{detected} / {checked} = {partial:.2%}")
        problems.append(f"{unchecked} mutants not checked")
    if rate < TARGET_RATE:
        problems.append(f"kill rate {rate:.2%} is below {TARGET_RATE:.0%}")
    if share > MAX_EQUIVALENT_SHARE:
        problems.append(f"equivalents are {share:.1%} of all, more than 5%")
    if stale:
        problems.append(f"declared equivalent but not surviving: {', '.join(stale)}")
    for problem in problems:
        print(f"FAILED: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

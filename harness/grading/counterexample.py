"""Turn a failure's notes into numbered steps in the spec's vocabulary.

A failure's notes (:attr:`harness.runner.Failure.counterexample`) interleave the
property's own ``note()`` narration ("request r1 finishes (free); entries A become
freeable") with Hypothesis' bookkeeping ("state.reach_item(...)", "Draw 3 (aim): 0",
"Failing test case: ..."). Students read the first; the second is how the engine drew
the example, and the reproducer script replays it as plain calls instead.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

# Lines Hypothesis writes (the first line of a note); the indented lines that follow
# such a line continue it.
_HYPOTHESIS_LINE = re.compile(
    r"^(Falsifying example|Failing test case|Trying example|(?:Falsifying|Failing) explicit"
    r" example"
    r"|(?:\w+(?:, \w+)* = )?state(?: = \w+\(|\.\w+\()|Draw \d+|Explanation:|Unreliable test"
    r"|You can reproduce"
    r"|Highest target score|\(Hypothesis: )"
)
_BLOB = re.compile(r"@reproduce_failure\((?P<args>.*)\)", re.DOTALL)


def is_hypothesis_line(line: str) -> bool:
    return bool(_HYPOTHESIS_LINE.match(line.strip()))


def narration(notes: Iterable[str]) -> list[str]:
    """The property's own narration lines, in order. When a property narrates nothing,
    Hypothesis' description of the example is all there is, so it is kept."""
    kept: list[str] = []
    everything: list[str] = []
    for note in notes:
        lines = note.strip("\n").splitlines()
        everything += [line.rstrip() for line in lines if line.strip()]
        if lines and is_hypothesis_line(lines[0]):
            continue  # the whole note (with its continuation lines) is Hypothesis'
        kept += [line.rstrip() for line in lines if line.strip()]
    return kept or everything


_ALREADY_NUMBERED = re.compile(r"\d+\. ")


def numbered(lines: Iterable[str]) -> list[str]:
    """``1. first``, ``2. second``, ... with continuation lines indented under them.
    Lines that are numbered already (the exhaustive checker's shortest paths, under a
    scenario heading) are kept as they are, and so is Hypothesis' own description of a
    failing example (a property that narrates nothing): its lines are not steps."""
    lines = list(lines)
    if any(_ALREADY_NUMBERED.match(line) for line in lines):
        return lines
    if lines and is_hypothesis_line(lines[0]):
        return lines
    out: list[str] = []
    number = 0
    for line in lines:
        if line.startswith((" ", "\t")) and out:
            out.append("   " + line)
            continue
        number += 1
        out.append(f"{number}. {line}")
    return out


def parse_blob(reproduce: str | None) -> tuple[str, bytes] | None:
    """``(version, blob)`` of a printed ``@reproduce_failure('6.x', b'...')``."""
    if not reproduce:
        return None
    match = _BLOB.search(reproduce)
    if not match:
        return None
    try:
        value = ast.literal_eval(f"({match['args']},)")
    except (ValueError, SyntaxError):
        return None
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], bytes)
    ):
        return value[0], value[1]
    return None

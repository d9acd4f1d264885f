"""The ``--exhaustive`` and ``--clone`` options of ``verify`` and ``grade``.

Apart from :mod:`exhaustive.check` so that the command line can offer them without
importing the searches, which drive the state machines and their models: the student
kit holds neither (docs/grading.md, "The student kit"), and there ``--exhaustive`` says
that what it searches is graded on the autograder.
"""

from __future__ import annotations

import argparse

#: The scopes of :data:`exhaustive.check.SCOPES`, by name.
SCOPE_NAMES: tuple[str, ...] = ("default", "full", "bounded")


def add_exhaustive_option(parser: argparse.ArgumentParser) -> None:
    """``--exhaustive [SCOPE]`` and ``--clone`` on ``verify`` and ``grade``."""
    parser.add_argument(
        "--exhaustive",
        nargs="?",
        const="default",
        choices=SCOPE_NAMES,
        metavar="SCOPE",
        help="check the state machines (ECM, SYS) by exhaustive search of every reachable "
        "state within a scope instead of Hypothesis: 'default' (SPEC.md, minutes), "
        "'bounded' (seconds) or 'full' (cache-manager depth 8, hours); deterministic, a "
        "violation comes with a shortest path",
    )
    parser.add_argument(
        "--clone",
        default="copy",
        choices=("copy", "replay"),
        help="with --exhaustive: reach each state by deep-copying its predecessor (fast) "
        "or by replaying its path on a fresh implementation (for implementations that "
        "keep state outside their objects)",
    )

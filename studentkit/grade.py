#!/usr/bin/env python3
"""Grade your adapter with the student kit (README.md beside this file).

    python grade.py path/to/your/adapter.py [--only NAME ...] [--seed S] [--format ...]

The same grader as the autograder's — the same properties, profile and seed — run from
this folder on the course's public items. The kit has no reference (neither the
reference implementation nor the models and oracles the checks compare with): a hidden
item (``autograder_only = true`` in rubrics/default.toml), or one whose check would need
the reference to stand in for a component you do not provide, reads "needs the
reference" (graded on the autograder, no points here), and no reproducer scripts are
written (replay a failure with the command the report prints). Every option of
``python -m properties grade`` works here (``python grade.py --help``) but
``--exhaustive``, the autograder's.
"""

from __future__ import annotations

import sys
from pathlib import Path

KIT = Path(__file__).resolve().parent
if str(KIT) not in sys.path:
    sys.path.insert(0, str(KIT))

from harness.cli import main  # noqa: E402 - needs the kit on sys.path

if __name__ == "__main__":
    raise SystemExit(main(["grade", *sys.argv[1:]], grade_prog="python grade.py"))

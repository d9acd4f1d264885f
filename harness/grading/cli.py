"""``python -m properties grade``: grade an adapter against a rubric.

Exit status: 0 with full marks, 1 otherwise, 2 when the command line or the rubric is
wrong or the adapter cannot be loaded (the report is still written then, with zero
points and what is wrong, so that an autograder always has a result to show).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from exhaustive.options import add_exhaustive_option
from harness.grading.formats import FORMATS, render
from harness.grading.grade import GRADING_PROFILE, GradeReport, grade
from harness.grading.rubric import RubricError, load_rubric
from harness.isolation.options import (
    add_isolation_options,
    limits_from,
    show_submission_output,
)
from harness.isolation.sandbox import SandboxUser, answer_key_open_to, usable_workers
from harness.loader import NEEDS_REFERENCE, REFERENCE_REF
from harness.names import HAS_REFERENCE, HOME
from harness.profiles import PROFILES

if TYPE_CHECKING:  # the student kit holds no exhaustive search (it drives the models)
    from exhaustive.check import Exhaustive
    from exhaustive.search import CloneMode

EXIT_FULL_MARKS, EXIT_POINTS_LOST, EXIT_USAGE = 0, 1, 2

#: Processes a grade runs its properties in by default: one per CPU this process may keep
#: busy (its cgroup's quota counted: a Gradescope autograder gets half a virtual CPU, so
#: one, unless its settings give more), fewer where its cgroup's memory would not hold
#: them; under a sandbox, at most one per worker user.
DEFAULT_JOBS = usable_workers()


#: ``grade --help`` ends with these (the module docstring says the same).
GRADE_EXIT_STATUSES = (
    "exit status: 0 with full marks, 1 otherwise, 2 when the command line or the rubric "
    "is wrong or the adapter cannot be loaded (the report is still written then)"
)


def add_grade_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], prog: str | None = None
) -> None:
    """Register ``grade`` on the ``python -m properties`` command line (``prog``: the
    command its usage names, when it is run as another, e.g. the kit's ``grade.py``)."""
    parser = commands.add_parser(
        "grade",
        prog=prog,
        help="grade an adapter against a rubric (score per item, reports, reproducers)",
        description="Run the properties a rubric needs against an adapter and report a "
        "score per rubric item, with a minimal counterexample and a standalone "
        "reproducer script for every failure (docs/grading.md).",
        epilog=GRADE_EXIT_STATUSES,
    )
    parser.add_argument(
        "adapter",
        nargs="?",
        default=REFERENCE_REF,
        metavar="ADAPTER",
        help=f"module name, .py file or package directory exposing ADAPTER "
        f"(default: {REFERENCE_REF})",
    )
    parser.add_argument("--profile", default=GRADING_PROFILE, choices=PROFILES)
    parser.add_argument(
        "--rubric", metavar="FILE", help="rubric TOML file (default: rubrics/default.toml)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help="run every property from this seed instead of the profile's derandomized "
        "default: a different, equally repeatable run (an instructor's secret seed)",
    )
    parser.add_argument(
        "--seed-file",
        metavar="FILE",
        help="read the seed from FILE: a secret seed stays off the command line, which "
        "any process on the machine may read (/proc/PID/cmdline)",
    )
    parser.add_argument(
        "--hide-seed",
        action="store_true",
        help=f"write --seed {'SECRET'} instead of the seed in the report's commands",
    )
    parser.add_argument("--format", default="text", choices=tuple(FORMATS))
    parser.add_argument("--out", metavar="PATH", help="write the report here (default: stdout)")
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help="grade only the items holding these properties, clause ids or item names",
    )
    parser.add_argument(
        "--reproducers",
        metavar="DIR",
        help="also write each failure's reproducer script into DIR",
    )
    parser.add_argument(
        "--no-reproducers",
        action="store_true",
        help="skip building reproducer scripts (faster; counterexamples are still shown)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--jobs", type=int, default=DEFAULT_JOBS, metavar="N",
        help="run the properties in N processes, each with its own isolated child (the "
        "report is the same for any N; default: the CPUs this process may use, fewer where "
        f"its memory limit would not hold them, here {DEFAULT_JOBS}; under --sandbox-user, "
        "at most one per name after the first)",
    )
    add_isolation_options(parser, isolated_by_default=True)
    add_exhaustive_option(parser)


def _clone_mode(args: argparse.Namespace) -> CloneMode:
    """An isolated adapter's components live in the child and cannot be deep-copied, so
    the exhaustive search reaches each state by replaying its path there."""
    mode: CloneMode = "replay" if limits_from(args) is not None else args.clone
    return mode


#: ``--exhaustive`` in the student kit, which holds neither the searches nor the models.
EXHAUSTIVE_IN_THE_KIT = (
    f"--exhaustive: the state machines it searches (ECM, SYS) {NEEDS_REFERENCE}: "
    "they are graded on the autograder"
)


def _exhaustive(args: argparse.Namespace) -> Exhaustive | None:
    if not args.exhaustive:
        return None
    from exhaustive.check import SCOPES, Exhaustive  # not in the student kit

    return Exhaustive(SCOPES[args.exhaustive], clone=_clone_mode(args))


def _warn_if_answer_key_open(*users: SandboxUser) -> None:
    """Say so on stderr when a sandbox user may read the answer key (from a checkout:
    only the bundle's setup.sh hides it, docs/grading.md "Isolation")."""
    for user in users:
        readable = answer_key_open_to(user, HOME)
        if readable:
            print(f"mmspec grade: warning: the sandbox user {user.name} may read the answer key "
                  f"({', '.join(readable)}): the submission could import the reference; "
                  "gradescope/setup.sh makes it root's alone (chmod -R go-rwx reference "
                  "properties/models ...)", file=sys.stderr)
            return


def run_grade(args: argparse.Namespace) -> int:
    if args.exhaustive and not HAS_REFERENCE:
        print(EXHAUSTIVE_IN_THE_KIT, file=sys.stderr)
        return EXIT_USAGE
    try:
        rubric = load_rubric(args.rubric)
        if args.seed_file:
            args.seed = _read_seed(args.seed_file)
    except (RubricError, ValueError, OSError) as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"[grade] {message}", file=sys.stderr, flush=True)

    try:
        limits = limits_from(args)
    except ValueError as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    if limits is not None and limits.sandbox is not None:
        _warn_if_answer_key_open(limits.sandbox, *limits.worker_sandboxes)

    try:
        report = grade(
            args.adapter,
            rubric,
            args.profile,
            args.seed,
            only=args.only,
            hide_seed=args.hide_seed,
            reproducers=not args.no_reproducers,
            progress=progress,
            isolation=limits,
            jobs=args.jobs,
            exhaustive=_exhaustive(args),
        )
    except ValueError as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    show_submission_output(report.submission_output)
    _write(render(report, args.format), args.out)
    if args.out:
        progress(f"{args.format} report written to {args.out}")
    if args.reproducers:
        written = _write_reproducers(report, Path(args.reproducers))
        progress(f"{written} reproducer script(s) written to {args.reproducers}")
    if report.load_error is not None:
        print(report.load_error, file=sys.stderr)
        return EXIT_USAGE
    return EXIT_FULL_MARKS if report.score == report.max_score else EXIT_POINTS_LOST


def _read_seed(path: str) -> int | None:
    """The seed in ``path`` (an integer; an empty file: none)."""
    text = Path(path).read_text(encoding="utf-8").strip()
    try:
        return int(text) if text else None
    except ValueError:
        raise ValueError(f"--seed-file {path}: not an integer seed") from None


def _write(text: str, out: str | None) -> None:
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _write_reproducers(report: GradeReport, folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    written: set[str] = set()
    for result in report.items:
        for failure in result.failures:
            reproducer = failure.reproducer
            if reproducer is None or reproducer.filename in written:
                continue
            (folder / reproducer.filename).write_text(reproducer.script, encoding="utf-8")
            written.add(reproducer.filename)
    return len(written)

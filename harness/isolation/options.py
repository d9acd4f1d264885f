"""The isolation options of ``python -m properties grade`` and ``verify``."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from collections.abc import Callable

from harness.isolation.sandbox import USER_ENV, sandbox_users
from harness.isolation.supervisor import PREFIX_ENV, Limits

_DEFAULTS = Limits()
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)(i?B)?\s*$", re.IGNORECASE)
_SCALE = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(text: str) -> int:
    """``2GiB``, ``512M``, ``1.5G``, ``1000000`` (bytes) -> bytes."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 2GiB, 512MiB)")
    return int(float(match.group(1)) * _SCALE[match.group(2).upper()])


def _positive(kind: type[float] | type[int]) -> Callable[[str], float | int]:
    def parse(text: str) -> float | int:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return parse


def add_isolation_options(parser: argparse.ArgumentParser, isolated_by_default: bool) -> None:
    group = parser.add_argument_group(
        "isolation",
        "run the adapter in a child process under limits; the verdict stays in this "
        "process (docs/grading.md, Isolation)",
    )
    if isolated_by_default:
        group.add_argument(
            "--in-process",
            action="store_true",
            help="run the adapter in the grader's own process (trusted code, debugging)",
        )
    else:
        group.add_argument(
            "--isolate", action="store_true", help="run the adapter in an isolated child"
        )
    group.add_argument(
        "--call-timeout", type=_positive(float), default=_DEFAULTS.call_seconds, metavar="S",
        help=f"wall-clock limit per call, seconds (default {_DEFAULTS.call_seconds:g})",
    )
    group.add_argument(
        "--property-timeout", type=_positive(float), default=_DEFAULTS.property_seconds,
        metavar="S",
        help="wall-clock time one property may spend waiting for the child, seconds "
        f"(default {_DEFAULTS.property_seconds:g})",
    )
    group.add_argument(
        "--memory-limit", type=parse_size, default=_DEFAULTS.memory_bytes, metavar="SIZE",
        help="the child's address-space limit (RLIMIT_AS; default 2GiB)",
    )
    group.add_argument(
        "--cpu-limit", type=_positive(int), default=_DEFAULTS.cpu_seconds, metavar="S",
        help=f"the child's CPU-time limit (RLIMIT_CPU; default {_DEFAULTS.cpu_seconds})",
    )
    group.add_argument(
        "--reply-limit", type=parse_size, default=_DEFAULTS.reply_bytes, metavar="SIZE",
        help="the largest reply read from the child; a larger one ends the property as the "
        "child's failure (default 32MiB)",
    )
    group.add_argument(
        "--sandbox-user", metavar="NAME[,NAME...]", default=os.environ.get(USER_ENV) or None,
        help="run the child as this unprivileged user (the grader must be root; "
        "gradescope/setup.sh creates mmspec-grader), and kill every process of that user "
        "when a child ends; with more names, each forked worker (--jobs) runs its children "
        "as one of the others, so a grade uses that many cores (setup.sh creates "
        f"mmspec-grader-1, ...); default ${USER_ENV}",
    )
    group.add_argument(
        "--child-prefix", metavar="WORDS", default=os.environ.get(PREFIX_ENV, ""),
        help="a command prefix for the child, e.g. an OS sandbox or another uid "
        f"(\"sudo -n -C 1000 -u grader\", \"bwrap ...\"); default ${PREFIX_ENV}",
    )


def limits_from(args: argparse.Namespace) -> Limits | None:
    """The limits the command line asks for, or None to run in process; raises
    :class:`~harness.isolation.sandbox.SandboxError` for an unusable sandbox user."""
    if getattr(args, "in_process", False) or not getattr(args, "isolate", True):
        return None
    users = sandbox_users(args.sandbox_user) if args.sandbox_user else ()
    return Limits(
        call_seconds=args.call_timeout,
        property_seconds=args.property_timeout,
        memory_bytes=args.memory_limit,
        cpu_seconds=args.cpu_limit,
        reply_bytes=args.reply_limit,
        child_prefix=tuple(shlex.split(args.child_prefix)),
        sandbox=users[0] if users else None,
        worker_sandboxes=users[1:],
    )


def show_submission_output(output: str) -> None:
    """The child's stdout/stderr, on stderr, marked as the submission's (never parsed)."""
    if not output:
        return
    print("---- submission output (stdout/stderr of the adapter; not part of the grade) ----",
          file=sys.stderr)
    sys.stderr.write(output if output.endswith("\n") else output + "\n")
    print("---- end of submission output ----", file=sys.stderr, flush=True)

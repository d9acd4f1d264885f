"""Command line: ``python -m properties verify`` and ``python -m properties list``.

Exit codes of ``verify``: 0 when every clause row is ``pass`` or ``not provided``, 1
when any is not, 2 when the adapter is malformed (or the command line is wrong).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from exhaustive.options import add_exhaustive_option
from harness import baseline as baselines
from harness import ci_output
from harness.catalog import (
    clauses_needing_the_reference,
    needing_the_reference,
    registered_properties,
)
from harness.declared import DeclarationError, judge, load_declaration, release_of
from harness.grading.cli import EXHAUSTIVE_IN_THE_KIT, add_grade_command, run_grade
from harness.isolation import IsolatedSession, Limits
from harness.isolation.options import (
    add_isolation_options,
    limits_from,
    show_submission_output,
)
from harness.loader import NEEDS_REFERENCE, REFERENCE_REF, AdapterLoadError
from harness.names import COMMAND, HAS_REFERENCE
from harness.profiles import (
    DEFAULT_PROFILE,
    PROFILES,
    ProfileUnavailableError,
    SharedDatabaseError,
)
from harness.replay import ReplayBlobError, parse_replay
from harness.report import render
from harness.runner import PropertyResult, Report, UnknownSelectionError, plan, verify
from spec.clauses import load_clauses, mmspec_version, spec_digest

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def main(argv: Sequence[str] | None = None, grade_prog: str | None = None) -> int:
    """The command line. ``grade_prog``: how ``grade``'s usage and help name the command
    (the student kit's ``python grade.py``; default ``python -m properties grade``)."""
    parser = _parser(grade_prog)
    args = parser.parse_args(argv)
    if args.command == "grade":
        return run_grade(args)
    if args.command == "verify":
        return _verify_vllm_aware(args)
    return _list()


def _environment_profile() -> str:
    """``$HYPOTHESIS_PROFILE`` when it names one of the suite's profiles (Hypothesis' own
    convention for choosing one), else the default; another name is said on stderr and
    ignored (an engine's own Hypothesis profiles are not the suite's)."""
    wanted = os.environ.get("HYPOTHESIS_PROFILE")
    if wanted is None or wanted in PROFILES:
        return wanted or DEFAULT_PROFILE
    print(
        f"mmspec: HYPOTHESIS_PROFILE={wanted!r} is not one of {', '.join(PROFILES)}; "
        f"using {DEFAULT_PROFILE}",
        file=sys.stderr,
    )
    return DEFAULT_PROFILE


#: ``verify --help`` ends with these (README.md, "Exit status" of verify, says the same).
VERIFY_EXIT_STATUSES = (
    "exit status: 0 when every row is pass or not provided, 1 otherwise, 2 when the "
    "adapter is malformed or the command line is wrong"
)


def _parser(grade_prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description="Run the executable specification's properties against an adapter.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"mmspec {mmspec_version()} (SPEC.md digest {spec_digest()})",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "verify",
        help="run the properties and print one verdict per clause",
        epilog=VERIFY_EXIT_STATUSES,
    )
    run.add_argument(
        "--adapter",
        default=REFERENCE_REF,
        metavar="REF",
        help="module name, .py file or package directory exposing ADAPTER "
        f"(default: {REFERENCE_REF})",
    )
    run.add_argument(
        "--profile",
        default=_environment_profile(),
        choices=PROFILES,
        help=f"Hypothesis profile (default: $HYPOTHESIS_PROFILE when it names one, else "
        f"{DEFAULT_PROFILE})",
    )
    run.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help="run only these properties (or the properties of these clause ids)",
    )
    run.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="run every property under a seed derived from N instead of the profile's own "
        "derandomized seed: another, equally repeatable run (a failure's replay command "
        "carries the seed)",
    )
    run.add_argument(
        "--set-aside",
        nargs="+",
        metavar="CLAUSE",
        default=[],
        help="judge the other clauses on the runs in which these hold: a test case that "
        "breaks one is rejected (how a report's per-clause failures replay)",
    )
    run.add_argument(
        "--replay",
        metavar="VERSION:BLOB",
        help="run only the one test case of this reproduce blob (a failure's second replay "
        "line gives it; the whole @reproduce_failure(...) is taken too), of the one "
        "property --only names: the shrunk example again, in about a second",
    )
    run.add_argument(
        "--jobs",
        type=_positive_int,
        default=1,
        metavar="N",
        help="run the properties in N forked processes, with --isolate each with a child of "
        "its own (the report is the one --jobs 1 gives: each property has its own seed). "
        "make verify uses 2",
    )
    _add_vllm_and_baseline_options(run)
    add_isolation_options(run, isolated_by_default=False)
    add_exhaustive_option(run)
    commands.add_parser("list", help="list the clauses and the properties that check them")
    add_grade_command(commands, prog=grade_prog)
    return parser


def _verify(
    adapter: str,
    profile: str,
    only: Sequence[str] | None,
    save_report: str | None = None,
    baseline: str | None = None,
    replay_options: str = "",
    isolation: Limits | None = None,
    seed: int | None = None,
    set_aside: Sequence[str] = (),
    jobs: int = 1,
    junit_xml: str | None = None,
    replay: tuple[str, bytes] | None = None,
) -> int:
    try:
        before = baselines.baseline_verdicts(baseline, adapter, profile, only) if baseline else None
        if isolation is None:
            report = verify(
                adapter, profile, only, progress=_progress, seed=seed, set_aside=set_aside,
                jobs=jobs, heartbeat=_heartbeat, replay=replay,
            )
        else:
            with IsolatedSession(adapter, isolation) as session:
                report = verify(
                    adapter, profile, only, progress=_progress, session=session, seed=seed,
                    set_aside=set_aside, jobs=jobs, heartbeat=_heartbeat, replay=replay,
                )
                show_submission_output(session.submission_output())
    except (
        AdapterLoadError,
        UnknownSelectionError,
        baselines.BaselineError,
        SharedDatabaseError,
        ProfileUnavailableError,
    ) as e:
        print(str(e), file=sys.stderr)
        _usage_error_outputs(adapter, str(e), junit_xml)
        return EXIT_USAGE
    if isolation is not None:
        replay_options += " --isolate"
    if save_report:
        baselines.save_verdicts(report, save_report, replay_options)
    _ci_outputs(report, junit_xml, replay_options)
    if before is not None:
        now = baselines.verdicts_of(report)
        sys.stdout.write(baselines.render_differences(before, now))
        return EXIT_FAILED if baselines.any_broke(before, now) else EXIT_OK
    sys.stdout.write(render(report, replay_options=replay_options))
    return _exit_status(report, only)


def _usage_error_outputs(adapter: str, message: str, junit_xml: str | None) -> None:
    """A run that judged nothing still tells the CI why: ``--junit-xml`` and, under
    GitHub Actions, an annotation (issue 33)."""
    if junit_xml:
        target = Path(junit_xml)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(ci_output.usage_error_junit(adapter, message), encoding="utf-8")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        print(ci_output.usage_error_annotation(message))


def _ci_outputs(report: Report, junit_xml: str | None, replay_options: str) -> None:
    """``--junit-xml``; under GitHub Actions, annotations and the step summary."""
    if junit_xml:
        target = Path(junit_xml)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(ci_output.junit_xml(report, replay_options), encoding="utf-8")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in ci_output.github_annotations(report, replay_options):
            print(line)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a", encoding="utf-8") as out:
                out.write(ci_output.step_summary(report, replay_options))


def _exit_status(report: Report, only: Sequence[str] | None) -> int:
    """0 when every row passes; for a pinned vLLM release (a declaration in
    adapters/vllm/expected/), 0 when every row is as declared and no defect-class
    finding stands: hazards are printed, and leave a clean release green (issue 14)."""
    version = release_of(report) if report.adapter_name.startswith("vllm ") else None
    try:
        declaration = load_declaration(version) if version else None
    except DeclarationError as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    if declaration is None:
        return EXIT_OK if report.ok else EXIT_FAILED
    lines, clean = judge(report, declaration, partial=bool(only))
    sys.stdout.write("\n" + "\n".join(lines) + "\n")
    return EXIT_OK if clean else EXIT_FAILED


# --- the vLLM adapter's source and baselines (docs/vllm.md) ------------------------------

_VLLM_ADAPTER = "adapters/vllm"


def _add_vllm_and_baseline_options(run: argparse.ArgumentParser) -> None:
    source = run.add_mutually_exclusive_group()
    source.add_argument(
        "--vllm-src",
        metavar="PATH",
        help="verify vLLM's code from this source tree (a git checkout or an unpacked "
        f"release); implies --adapter {_VLLM_ADAPTER}",
    )
    source.add_argument(
        "--vllm",
        metavar="VERSION",
        help="verify this vLLM release (its wheel fetched with pip download --no-deps and "
        f"unpacked into .vllm-cache/); implies --adapter {_VLLM_ADAPTER}",
    )
    run.add_argument(
        "--baseline",
        metavar="VERSION|PATH|REPORT",
        help="print only the verdicts that differ from this baseline: a vLLM version, a vLLM "
        "source tree, or a report saved with --save-report (exit 1 when a verdict broke)",
    )
    run.add_argument(
        "--save-report",
        metavar="FILE",
        help="save the verdicts as JSON, each failing row with its failures (message, "
        "counterexample, reproduce blob, replay command)",
    )
    run.add_argument(
        "--junit-xml",
        metavar="FILE",
        help="also write a JUnit XML report: one test case per (clause, property) row "
        "(under GitHub Actions, failing rows are also annotated and summarized)",
    )


def _verify_vllm_aware(args: argparse.Namespace) -> int:
    adapter: str = args.adapter
    unknown = [c for c in args.set_aside if c not in load_clauses()]
    if unknown:
        print(f"--set-aside {' '.join(unknown)}: not clauses of SPEC.md", file=sys.stderr)
        return EXIT_USAGE
    replay = ""
    if args.vllm or args.vllm_src:
        try:
            tree = baselines.fetch_vllm(args.vllm) if args.vllm else args.vllm_src
        except baselines.BaselineError as e:
            print(str(e), file=sys.stderr)
            return EXIT_USAGE
        os.environ[baselines.VLLM_SOURCE_ENV] = os.path.abspath(tree)
        if adapter == REFERENCE_REF:
            adapter = _VLLM_ADAPTER
        replay = f" --vllm-src {os.path.abspath(tree)}"
    try:
        blob = parse_replay(args.replay) if args.replay is not None else None
    except ReplayBlobError as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    if blob is not None and (args.exhaustive or args.baseline):
        print("--replay runs one test case: not with --exhaustive or --baseline", file=sys.stderr)
        return EXIT_USAGE
    if args.exhaustive:
        return _verify_exhaustive(args, adapter, replay)  # deterministic: no seed to take
    if args.seed is not None:
        replay += f" --seed {args.seed}"
    only = args.only
    if not HAS_REFERENCE:  # the student kit: its own properties, the rest on the autograder
        hidden = [c for c in load_clauses() if c in clauses_needing_the_reference()]
        asked = [n for n in only or () if n in needing_the_reference() or n in hidden]
        if asked:
            print(f"{', '.join(asked)}: {NEEDS_REFERENCE}: graded on the autograder",
                  file=sys.stderr)
            return EXIT_USAGE
        if not only:
            print(f"student kit: {len(hidden)} clauses are graded on the autograder, each "
                  f"{NEEDS_REFERENCE}: {', '.join(hidden)}", file=sys.stderr)
            only = list(registered_properties())
    return _verify(
        adapter,
        args.profile,
        only,
        args.save_report,
        args.baseline,
        replay,
        limits_from(args),
        args.seed,
        args.set_aside,
        args.jobs,
        args.junit_xml,
        blob,
    )


def _verify_exhaustive(args: argparse.Namespace, adapter: str, replay: str) -> int:
    """``verify --exhaustive``: the state machines by exhaustive search (docs/exhaustive.md)."""
    if not HAS_REFERENCE:
        print(EXHAUSTIVE_IN_THE_KIT, file=sys.stderr)
        return EXIT_USAGE
    from exhaustive.check import COVERED, SCOPES, Exhaustive, print_summaries

    isolation = limits_from(args)
    # isolated components live in the child and cannot be deep-copied: replay paths there
    exhaustive = Exhaustive(
        SCOPES[args.exhaustive], clone="replay" if isolation is not None else args.clone
    )
    only = args.only or list(COVERED)
    try:
        if isolation is None:
            report = verify(
                adapter, args.profile, only, progress=_progress, transform=exhaustive.transform
            )
        else:
            with IsolatedSession(adapter, isolation) as session:
                report = verify(
                    adapter,
                    args.profile,
                    only,
                    progress=_progress,
                    transform=exhaustive.transform,
                    session=session,
                )
                show_submission_output(session.submission_output())
    except (AdapterLoadError, UnknownSelectionError) as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    print_summaries(exhaustive)
    sys.stdout.write(render(
        report, replay_options=f" --exhaustive {args.exhaustive}{replay}",
        states=exhaustive.results,  # the machines searched: their counts are states
    ))
    return EXIT_OK if report.ok else EXIT_FAILED


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


#: The property whose progress line is open (``[i/n] name ...``, its verdict to come).
_open: list[str] = []


def _progress(index: int, total: int, name: str, result: PropertyResult | None) -> None:
    if result is None:
        print(f"[{index}/{total}] {name} ...", end="", file=sys.stderr, flush=True)
        _open[:] = [f"[{index}/{total}] {name}"]
        return
    # a heartbeat closed the line: the verdict gets a line of its own
    lead = "" if _open else f"[{index}/{total}] {name}:"
    _open.clear()
    print(f"{lead} {result.verdict_text()} ({result.seconds:.1f} s)", file=sys.stderr, flush=True)


def _heartbeat(line: str) -> None:
    """A long property's progress (:mod:`harness.heartbeat`), on a line of its own."""
    lead = "\n" if _open else ""
    _open.clear()
    print(f"{lead}  ... {line}", file=sys.stderr, flush=True)


def _list() -> int:
    clauses = load_clauses()
    registry = registered_properties()
    print("clauses (SPEC.md) and the properties that check them:")
    by_clause: dict[str, list[str]] = {}
    for clause, name in plan(clauses, registry):
        by_clause.setdefault(clause, [])
        if name is not None and name in needing_the_reference():
            by_clause[clause].append(f"{name} ({NEEDS_REFERENCE})")
        elif name is not None:
            by_clause[clause].append(name if name in registry else f"{name} (MISSING)")
    for clause_id, names in by_clause.items():
        title = clauses[clause_id].title if clause_id in clauses else "(not in SPEC.md)"
        print(f"  {clause_id:8} {title}: {', '.join(names) or '(no property)'}")
    print()
    print("properties (name: clauses; subject components; also uses):")
    for spec in registry.values():
        uses = f"; uses {', '.join(spec.uses)}" if spec.uses else ""
        print(
            f"  {spec.name}: {', '.join(spec.clauses)}; subject {', '.join(spec.subject)}"
            f"{uses}  [{spec.module}]"
        )
    return EXIT_OK

"""Run CrossHair on one contract applied to one implementation, bounded by iterations.

The verdict repeats: the search is cut off after a fixed number of *iterations*
(execution paths tried), never by a clock — no per-condition or per-path timeout, and
no "uninteresting iterations" cut-off — and CrossHair's path choices come from a fixed
seed. Each SMT query is bounded by Z3's resource limit (``rlimit``: abstract solver
work, the same on every machine) instead of Z3's wall-clock timeout: a query that runs
out of it counts as undecided, exactly as on every other run.

CrossHair is imported only here, and only when a search runs: it lives in its own
virtualenv (``make crosshair``; requirements-crosshair.txt), so the rest of
``properties`` imports without it.
"""

from __future__ import annotations

import collections
import importlib
import importlib.util
import math
import os
import time
from dataclasses import dataclass
from enum import Enum
from typing import Any

from contracts.contract import Contract, Implementation, checkable

#: Z3 work units per SMT query (CrossHair's CROSSHAIR_SMT_RLIMIT): enough for these
#: contracts' queries, and a deterministic bound on a pathological one. CrossHair reads
#: the variable once, when it is first imported: it is set here, before any import of
#: it, and :func:`search` refuses to run if CrossHair was imported without it.
SMT_RLIMIT = 2_000_000
_RLIMIT_VARIABLE = "CROSSHAIR_SMT_RLIMIT"
os.environ.setdefault(_RLIMIT_VARIABLE, str(SMT_RLIMIT))


class Outcome(Enum):
    #: Every path was explored and none failed (still only CrossHair's model of Python).
    CONFIRMED = "confirmed on all paths"
    #: No counterexample within the iteration bound: not a proof.
    NONE_FOUND = "no counterexample"
    COUNTEREXAMPLE = "counterexample"
    #: The contract itself is broken (unsatisfiable precondition, no checkable found).
    ERROR = "error"


@dataclass(frozen=True)
class SearchResult:
    contract: str
    target: str
    outcome: Outcome
    iterations: int
    seconds: float
    #: CrossHair's message: the counterexample call and the violated condition.
    detail: str = ""


def crosshair_available() -> bool:
    """Whether CrossHair is installed here (without importing it)."""
    return importlib.util.find_spec("crosshair") is not None


def _crosshair() -> tuple[Any, Any]:
    """``(crosshair.core_and_libs, crosshair.options)``, checking that the SMT work bound
    is in force (without it and without timeouts, one hard query could run forever)."""
    try:
        core = importlib.import_module("crosshair.core_and_libs")
        options = importlib.import_module("crosshair.options")
        statespace = importlib.import_module("crosshair.statespace")
    except ImportError as e:
        raise RuntimeError(
            "CrossHair is not installed in this interpreter: run `make crosshair`, which "
            "builds .venv-crosshair from requirements-crosshair.txt"
        ) from e
    wanted = int(os.environ[_RLIMIT_VARIABLE])
    if wanted < 1 or statespace.CROSSHAIR_SMT_RLIMIT != wanted:
        raise RuntimeError(
            f"CrossHair runs with {_RLIMIT_VARIABLE}={statespace.CROSSHAIR_SMT_RLIMIT}, not "
            f"{wanted} (a positive bound): import contracts.search before "
            "crosshair, so that the bound is set when CrossHair reads it"
        )
    return core, options


def search(
    contract: Contract[Any, Any],
    implementation: Implementation[Any, Any],
    target: str,
    iterations: int,
) -> SearchResult:
    """Look for a case in ``contract``'s domain on which ``implementation`` violates its
    postcondition or raises, trying at most ``iterations`` execution paths."""
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    core, options_module = _crosshair()
    options = options_module.AnalysisOptionSet(
        analysis_kind=[options_module.AnalysisKind.asserts],
        max_iterations=iterations,
        max_uninteresting_iterations=0,  # 0: never stop early for lack of progress
        per_condition_timeout=math.inf,
        per_path_timeout=math.inf,  # also lifts Z3's wall-clock timeout
    )
    start = time.perf_counter()
    checkables = core.analyze_function(checkable(contract, implementation), options)
    if not checkables:
        return SearchResult(
            contract.name, target, Outcome.ERROR, 0, 0.0, "CrossHair found no condition to check"
        )
    stats: collections.Counter[str] = collections.Counter()
    messages: list[Any] = []
    for item in checkables:
        item.options.stats = stats
        messages.extend(item.analyze())
    seconds = time.perf_counter() - start
    paths = stats["num_paths"]
    states = {message.state.name for message in messages}
    detail = "; ".join(message.message for message in messages if message.state.name not in {
        "CONFIRMED", "CANNOT_CONFIRM"})
    if states & {"EXEC_ERR", "POST_FAIL", "POST_ERR"}:
        outcome = Outcome.COUNTEREXAMPLE
    elif states & {"PRE_UNSAT", "SYNTAX_ERR", "IMPORT_ERR"}:
        outcome = Outcome.ERROR
    elif states == {"CONFIRMED"}:
        outcome = Outcome.CONFIRMED
    else:
        outcome = Outcome.NONE_FOUND
    return SearchResult(contract.name, target, outcome, paths, seconds, detail)

"""Breadth-first search over a state machine's operation sequences, within a scope.

A *space* is one scenario of a scope (a capacity and its requests, an engine
configuration and its prompts): it builds a fresh, set-up machine, lists the operations
enabled in a state, checks the invariants after one, and names a state by its *key* —
the model's state plus the implementation's observable state. The search visits each
key once, in breadth-first order, up to a depth (number of operations); the first
operation that raises ends the search of its space, and, since every shorter sequence
was tried first, its path is a shortest one. Over several spaces the search keeps the
shortest violation (the earliest space on a tie): once one of length ``L`` is found,
the remaining spaces are searched to depth ``L - 1`` only.

Reaching a state's successors needs the state itself once per operation. Machines are
deep-copied (the implementation with them), which is exact for any implementation whose
state lives in its own objects; ``clone="replay"`` instead re-executes the path from a
fresh machine for every successor (slower, and exact for any deterministic
implementation, even one keeping state elsewhere). A machine that cannot be deep-copied
is replayed automatically.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar

from properties.framework import collect_notes

M = TypeVar("M")

CloneMode = Literal["copy", "replay"]


@dataclass(frozen=True)
class Operation(Generic[M]):
    """One enabled operation: ``label`` names it in the spec's vocabulary, ``act``
    performs it (with the machine's lockstep checks) on the machine it is given. It
    must depend on plain values only, never on a particular machine object, so that it
    applies to a copy or to a replayed machine alike."""

    label: str
    act: Callable[[M], None]


class Space(Protocol[M]):
    """One scenario of a scope."""

    @property
    def description(self) -> str: ...

    def start(self) -> M:
        """A fresh machine, set up for the scenario."""
        ...

    def operations(self, machine: M) -> Sequence[Operation[M]]:
        """The operations enabled in ``machine``'s state, in a fixed order."""
        ...

    def after(self, machine: M) -> None:
        """The invariants every state must satisfy (raises on a violation)."""
        ...

    def key(self, machine: M) -> Hashable:
        """The state's identity: model state plus the implementation's observable state."""
        ...

    def clone(self, machine: M) -> M:
        """An independent machine in the same state (raises if it cannot be copied)."""
        ...


@dataclass(frozen=True)
class PathStep:
    """One operation of a path and what the machine narrated while performing it."""

    label: str
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Violation:
    """The first failure of a search: where (the scenario and its set-up narration),
    how (the shortest path, the last step the failing one) and what was raised."""

    scenario: str
    setup: tuple[str, ...]
    path: tuple[PathStep, ...]
    error: BaseException


@dataclass
class SearchResult:
    """What a search covered, and its violation if any."""

    spaces: int = 0
    states: int = 0
    transitions: int = 0
    #: deepest level fully or partly explored (operations from the start)
    depth_reached: int = 0
    seconds: float = 0.0
    replayed_spaces: int = 0
    violation: Violation | None = None
    per_space: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class _Node(Generic[M]):
    key: Hashable
    machine: M | None
    ops: tuple[Operation[M], ...]


def explore(
    spaces: Sequence[Space[M]],
    depth: int,
    clone: CloneMode = "copy",
    progress: Callable[[str], None] | None = None,
) -> SearchResult:
    """Search every space to ``depth`` operations; see the module docstring."""
    result = SearchResult()
    started = time.perf_counter()
    bound = depth
    for space in spaces:
        found = _explore_space(space, bound, clone, result)
        result.spaces += 1
        if progress is not None:
            progress(f"{space.description}: {result.per_space[-1][1]} states")
        if found is not None and (
            result.violation is None or len(found.path) < len(result.violation.path)
        ):
            result.violation = found
            bound = len(found.path) - 1
            if bound < 0:
                break
    result.seconds = time.perf_counter() - started
    return result


def _explore_space(
    space: Space[M], depth: int, clone: CloneMode, result: SearchResult
) -> Violation | None:
    with collect_notes() as setup_notes:
        try:
            first = space.start()
            space.after(first)
        except Exception as e:  # noqa: BLE001 - a failing set-up is a zero-step violation
            result.per_space.append((space.description, 0))
            return Violation(space.description, tuple(setup_notes), (), e)
    setup = tuple(setup_notes)
    replay = clone == "replay"
    root_key = space.key(first)
    #: key -> (parent key, step into it); the root has none
    parents: dict[Hashable, tuple[Hashable, PathStep] | None] = {root_key: None}
    frontier: list[_Node[M]] = [_Node(root_key, None if replay else first, ())]
    level = 0
    while frontier and level < depth:
        level += 1
        result.depth_reached = max(result.depth_reached, level)
        following: list[_Node[M]] = []
        for node in frontier:
            for op in _operations(space, node):
                machine, replay = _successor_base(space, node, replay)
                result.transitions += 1
                with collect_notes() as lines:
                    try:
                        op.act(machine)
                        space.after(machine)
                    except Exception as e:  # noqa: BLE001 - every failure ends the search
                        step = PathStep(op.label, tuple(lines))
                        path = (*_path_to(parents, node.key), step)
                        result.per_space.append((space.description, len(parents)))
                        result.states += len(parents)
                        return Violation(space.description, setup, path, e)
                key = space.key(machine)
                if key in parents:
                    continue
                parents[key] = (node.key, PathStep(op.label, tuple(lines)))
                following.append(_Node(key, None if replay else machine, (*node.ops, op)))
        frontier = following
    if replay:
        result.replayed_spaces += 1
    result.per_space.append((space.description, len(parents)))
    result.states += len(parents)
    return None


def _operations(space: Space[M], node: _Node[M]) -> Sequence[Operation[M]]:
    machine = node.machine if node.machine is not None else _replayed(space, node)
    return space.operations(machine)


def _successor_base(space: Space[M], node: _Node[M], replay: bool) -> tuple[M, bool]:
    """A machine in ``node``'s state that the next operation may change: a deep copy,
    or a replay of the path (also from now on, when the machine cannot be copied)."""
    if not replay and node.machine is not None:
        try:
            return space.clone(node.machine), False
        except Exception:  # noqa: BLE001 - uncopyable implementations are replayed
            replay = True
    return _replayed(space, node), replay


def clone_state(machine: M, state: Sequence[str], shared: Sequence[object] = ()) -> M:
    """A copy of ``machine`` whose attributes named in ``state`` are deep-copied together
    (so that objects they share stay shared) and whose other attributes — the
    scenario, Hypothesis' bookkeeping — are the original's. ``shared``: immutable
    objects to keep as they are rather than copy."""
    twin = copy.copy(machine)
    memo: dict[int, object] = {id(obj): obj for obj in shared}
    for name in state:
        setattr(twin, name, copy.deepcopy(getattr(machine, name), memo))
    return twin


def _replayed(space: Space[M], node: _Node[M]) -> M:
    with collect_notes():
        machine = space.start()
        for op in node.ops:
            op.act(machine)
    return machine


def _path_to(
    parents: dict[Hashable, tuple[Hashable, PathStep] | None], key: Hashable
) -> tuple[PathStep, ...]:
    steps: list[PathStep] = []
    entry = parents[key]
    while entry is not None:
        parent, step = entry
        steps.append(step)
        entry = parents[parent]
    return tuple(reversed(steps))

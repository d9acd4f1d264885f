"""The encoder cache manager's exhaustive scope (ECM-1..9).

Each scenario is a capacity, sizes for images A, B, C and three requests over them
(the same image twice in one request, and every image shared across requests). The
operations are those of ``EncoderCacheMachine`` — every one enabled, with every
argument, instead of one drawn at random:

* ``reach`` of every item (what the scheduling hook does: a hit, or on a miss
  ``can_allocate`` with the step's planned total and, if granted, ``allocate``), with the
  step's remaining encoder budget ample, exactly the item's size, one below, and zero;
* ``can_allocate`` of every item not held nor planned, with the same budgets; a granted
  item joins the step's plan (allocated at the step's end);
* ``free_encoder_input`` of every referenced item; ``free`` of every request with
  references; all requests finishing at once;
* the step's end (planned items allocated, the freed hashes drained), and a drain
  alone while planned items still wait.

After each operation the machine's invariant compares every observable of the
implementation with the model (``agrees_with_model``). A state is the model's state
(held sizes, references by item, freeable order, evictions since the drain, the step's
plan) plus the implementation's observable state (``cached``, ``freeable``, both slot
counts, ``get_cached_input_ids`` of every request); the drained list itself is not
observable without draining, and is represented by the model's evictions since the
last drain.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from exhaustive.search import Operation, clone_state
from properties.encoder_cache_machine import Image, Scenario, cached_of, make_request
from spec.types import RequestView

#: A machine built by ``encoder_cache_machine`` (its class is local to that builder).
Machine = Any

LABELS = "ABC"


@dataclass(frozen=True)
class EcmScope:
    """The scenarios and depth of the search (SPEC.md "## Exhaustive scopes")."""

    capacities: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
    #: the sizes (embeddings) each image may have; every assignment to A, B, C is tried
    sizes: tuple[int, ...] = (1, 2, 3)
    #: the requests' items, by image label, in order
    requests: tuple[tuple[str, ...], ...] = (("A", "B", "A"), ("B",), ("C",))
    depth: int = 6

    def scenarios(self) -> list[Scenario]:
        used = sorted({label for items in self.requests for label in items})
        scenarios = []
        for capacity in self.capacities:
            for sizes in itertools.product(self.sizes, repeat=len(used)):
                images = {
                    label: Image(label, size, 0) for label, size in zip(used, sizes, strict=True)
                }
                requests = tuple(
                    make_request(f"r{k}", [images[label] for label in items])
                    for k, items in enumerate(self.requests, 1)
                )
                scenarios.append(Scenario(capacity, tuple(images.values()), requests))
        return scenarios

    def describe(self) -> str:
        shapes = ", ".join(f"r{k} [{' '.join(items)}]" for k, items in enumerate(self.requests, 1))
        return (
            f"encoder cache manager: capacity {_span(self.capacities)} embeddings; images "
            f"{', '.join(sorted({x for r in self.requests for x in r}))} of sizes "
            f"{_span(self.sizes)} (every assignment); requests {shapes}; up to "
            f"{self.depth} operations"
        )


def _span(values: Sequence[int]) -> str:
    ordered = sorted(values)
    if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 1:
        return f"{ordered[0]}..{ordered[-1]}"
    return ", ".join(map(str, ordered))


#: The step's remaining encoder budget when an item is reached, by how it relates to the
#: item's size (``EncoderCacheMachine``'s names): exactly the size (granted iff there is
#: room, the boundary ECM-4 is about), one below, and zero. A budget above the size
#: behaves as the exact one in a correct implementation and is left out.
REACH_BUDGETS = ("exact", "just_below", "zero")

#: The budget of a planned ``can_allocate``: the item's size (the planned total is the
#: point here; the budget boundary is covered by ``reach``).
PLAN_BUDGETS = ("exact",)


class EcmSpace:
    """One scenario: ``machine_class`` is the property's ``EncoderCacheMachine``."""

    def __init__(self, machine_class: Callable[[], Machine], scenario: Scenario) -> None:
        self.machine_class = machine_class
        self.scenario = scenario
        sizes = " ".join(f"{im.mm_hash}={im.num_embeds}" for im in scenario.images)
        self.description = f"cache {scenario.cache_size}, images {sizes}"

    def start(self) -> Machine:
        machine = self.machine_class()
        machine.setup(self.scenario)
        return machine

    def after(self, machine: Machine) -> None:
        machine.agrees_with_model()

    def clone(self, machine: Machine) -> Machine:
        return clone_state(machine, _STATE, _shared(self.scenario))

    def operations(self, machine: Machine) -> list[Operation[Machine]]:
        model = machine.model
        ops: list[Operation[Machine]] = []
        every: list[tuple[RequestView, int]] = machine.every_item()
        for req, i in every:
            label = machine.item_label(req, i)
            if model.is_held(req.items[i].mm_hash):
                ops.append(Operation(f"{label} is reached (a hit)", _reach(req, i, "ample")))
                continue
            for kind, budget in _budgets(machine, req, i, REACH_BUDGETS):
                label_budget = f"{label} is reached with encoder budget {budget}"
                ops.append(Operation(label_budget, _reach(req, i, kind)))
        planned = {r.items[i].mm_hash for r, i in machine.plan}
        candidates = [
            (req, i)
            for req, i in every
            if not model.is_held(req.items[i].mm_hash) and req.items[i].mm_hash not in planned
        ] or every
        for req, i in candidates:
            label = machine.item_label(req, i)
            for kind, budget in _budgets(machine, req, i, PLAN_BUDGETS):
                ops.append(
                    Operation(
                        f"{label}: can_allocate with encoder budget {budget}, planned "
                        f"{machine.planned} (joins the step's plan if granted)",
                        _plan(req, i, kind),
                    )
                )
        for rid, i in machine.referenced_items():
            ops.append(Operation(f"free_encoder_input({rid}, item {i})", _release(rid, i)))
        for rid in sorted(model.uses):
            ops.append(Operation(f"free({rid})", _free(rid)))
        if len(model.uses) >= 2:
            ops.append(Operation("every running request finishes", _all_finish))
        if machine.plan or model.evicted_since_drain:
            ops.append(Operation("the step ends (allocate planned, drain)", _end_step(False)))
            ops.append(Operation("drain while planned items wait", _end_step(True)))
        if (
            machine.resettable
            and model.sizes
            and not (machine.plan or machine.duplicates or model.evicted_since_drain)
        ):  # between steps, as the machine's rule
            ops.append(Operation("the encoder cache is reset (new weights)", _reset))
        return ops

    def key(self, machine: Machine) -> Hashable:
        model = machine.model
        impl = machine.cache
        return (
            tuple(sorted(model.sizes.items())),
            tuple(sorted((rid, tuple(sorted(items.items()))) for rid, items in model.uses.items())),
            tuple(model.freeable.items()),
            # the model drains each of these once unless held: their order and
            # repetitions do not matter to it
            frozenset(model.evicted_since_drain),
            frozenset(model.may_drain),
            tuple((r.request_id, i) for r, i in machine.plan),
            machine.planned,
            tuple((r.request_id, i) for r, i in machine.duplicates),
            tuple(sorted((h, tuple(sorted(ids))) for h, ids in cached_of(impl).items())),
            tuple(impl.freeable.items()),
            impl.num_free_slots,
            impl.num_freeable_slots,
            tuple(tuple(sorted(impl.get_cached_input_ids(r))) for r in machine.requests),
        )


#: The machine's attributes that change as it runs (the rest is the scenario, fixed).
_STATE = ("impl", "model", "plan", "planned", "duplicates")


def _shared(scenario: Scenario) -> list[object]:
    """The scenario's immutable objects, which copies may share."""
    shared: list[object] = [scenario, scenario.requests, scenario.images]
    for req in scenario.requests:
        shared += [req, req.items, *req.items]
        shared += [item.mm_position for item in req.items]
    return shared


def _budgets(
    machine: Machine, req: RequestView, input_id: int, kinds: Sequence[str]
) -> list[tuple[str, int]]:
    """Each budget kind with its value, dropping kinds whose value repeats (a size-1
    item's "one below" is zero)."""
    n = req.items[input_id].num_embeds
    seen: dict[int, str] = {}
    for kind in kinds:
        seen.setdefault(machine.budget_for(n, kind), kind)
    return [(kind, budget) for budget, kind in seen.items()]


def _reach(req: RequestView, input_id: int, kind: str) -> Callable[[Machine], None]:
    return lambda machine: machine.reach(req, input_id, kind)


def _plan(req: RequestView, input_id: int, kind: str) -> Callable[[Machine], None]:
    return lambda machine: machine.plan_item(req, input_id, kind, None)


def _release(rid: str, input_id: int) -> Callable[[Machine], None]:
    return lambda machine: machine.release(rid, input_id)


def _free(rid: str) -> Callable[[Machine], None]:
    return lambda machine: machine.do_free(rid)


def _all_finish(machine: Machine) -> None:
    machine.all_finish()


def _reset(machine: Machine) -> None:
    machine.reset()


def _end_step(drain_only: bool) -> Callable[[Machine], None]:
    return lambda machine: machine.finish_step(drain_only)

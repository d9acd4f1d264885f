"""``EncoderCacheMachine``: the encoder cache manager against its model (ECM-1..9).

The machine drives the implementation the way the scheduler does: a request reaches
one of its items and checks the cache (hit or miss); on a miss it asks ``can_allocate``
with the step's remaining encoder budget and the embeddings already planned this step;
planned items are then allocated; consumed items are released one at a time
(``free_encoder_input``); finished, aborted or preempted requests release everything
(``free``); the scheduler drains ``get_freed_mm_hashes`` for the worker. The trusted model
(:mod:`properties.models.encoder_cache`) takes every step in lockstep, and after each
step one invariant compares the two. Transitions are recorded from the model's state
changes (SPEC.md "## Transitions").

This module holds the rules that drive; the rest is apart, each readable alone:
:mod:`properties.encoder_cache_scenarios` (the universe the rules draw from and the
optional capabilities, explicit preconditions), :mod:`properties.encoder_cache_invariants`
(one checker per clause) and :mod:`properties.encoder_cache_narration` (what a
counterexample says). The class is built inside :func:`encoder_cache_machine` because
it closes over the adapter's factory; its rule names, draws and labels are what a saved
counterexample replays, so they stay as they are. Over 400 lines because Hypothesis takes
one machine's rules from one class, and a quarter of it is imports and re-exports.
"""

from __future__ import annotations

from typing import cast

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from properties.encoder_cache_invariants import (
    cached_of,
    each_listing,
    ecm1_slots,
    ecm2_free_appends,
    ecm2_freeable_order,
    ecm2_released_is_newest,
    ecm3_allocated_references,
    ecm3_cached,
    ecm3_check_answer,
    ecm3_hit_references,
    ecm3_listing,
    ecm4_grant_leaves_room,
    ecm4_refusal_changes_nothing,
    ecm4_verdict,
    ecm5_evicts_exactly,
    ecm6_freed_references_nothing,
    ecm6_items_covered,
    ecm6_request_keeps_reference,
    ecm7_drain,
    ecm8_bookkeeping,
    ecm9_reset_forgets,
    listed_input_ids,
    snapshot,
)
from properties.encoder_cache_narration import (
    fmt_cache,
    item_label,
    said_can_allocate,
    said_check,
    said_free,
)
from properties.encoder_cache_scenarios import (
    BOOKKEEPING,
    BUDGET_KINDS,
    IMAGE_SHAPES,
    RESET,
    Image,
    Scenario,
    capability_probe,
    make_request,
    pick,
    provides,
    scenarios,
)
from properties.framework import (
    Parts,
    Runnable,
    TransitionRecorder,
    clause_property,
    machine,
    note,
)
from properties.models.encoder_cache import EncoderCacheModel, Reference
from spec.components import EncoderCacheManager, ResettableEncoderCache
from spec.types import RequestView

#: Importable from here as before the split (exhaustive/ecm.py, tests).
__all__ = [
    "BOOKKEEPING",
    "BUDGET_KINDS",
    "ECM_CLAUSES",
    "IMAGE_SHAPES",
    "RESET",
    "Image",
    "Scenario",
    "cached_of",
    "capability_probe",
    "encoder_cache_machine",
    "fmt_cache",
    "make_request",
    "pick",
    "provides",
    "scenarios",
    "snapshot",
]

ECM_CLAUSES = ("ECM-1", "ECM-2", "ECM-3", "ECM-4", "ECM-5", "ECM-6", "ECM-7", "ECM-8", "ECM-9")


@clause_property(
    "EncoderCacheMachine",
    ECM_CLAUSES,
    subject=("encoder_cache_manager",),
    capabilities=(
        ("ECM-8", capability_probe(BOOKKEEPING, "ECM-8")),
        ("ECM-9", capability_probe(RESET, "ECM-9")),
    ),
)
def encoder_cache_machine(parts: Parts) -> Runnable:
    """ECM-1..9: the implementation and the model in lockstep (ECM-8 and ECM-9 where
    the implementation has their optional capability)."""
    factory = parts.encoder_cache_manager

    class EncoderCacheMachine(TransitionRecorder, RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.requests: tuple[RequestView, ...] = ()
            self.impl: EncoderCacheManager | None = None
            self.model = EncoderCacheModel(0)
            #: items that passed can_allocate this "step" and await allocate, and the
            #: embeddings they plan (what the scheduler passes as num_embeds_to_schedule)
            self.plan: list[tuple[RequestView, int]] = []
            self.planned = 0
            self.duplicates: list[tuple[RequestView, int]] = []
            self.resettable = self.bookkeeping = False

        # --- setup --------------------------------------------------------------------

        @initialize(scenario=scenarios())
        def setup(self, scenario: Scenario) -> None:
            self.requests = scenario.requests
            self.impl = factory(scenario.cache_size)
            self.model = EncoderCacheModel(scenario.cache_size)
            self.resettable = provides(self.impl, RESET)
            self.bookkeeping = provides(self.impl, BOOKKEEPING)
            sizes = ", ".join(f"{im.mm_hash}={im.num_embeds}" for im in scenario.images)
            note(f"cache of {scenario.cache_size} embeddings; images {sizes}")
            for req in self.requests:
                hashes = " ".join(item.mm_hash for item in req.items)
                note(f"request {req.request_id} has items [{hashes}]")

        @property
        def cache(self) -> EncoderCacheManager:
            assert self.impl is not None, "setup runs first"
            return self.impl

        def item_label(self, req: RequestView, input_id: int) -> str:
            return item_label(req, input_id)

        def record_reference(self, ref: Reference) -> None:
            if ref.items_with_hash >= 2:
                self.reached("duplicate_in_request")

        def every_item(self) -> list[tuple[RequestView, int]]:
            return [(req, i) for req in self.requests for i in range(len(req.items))]

        def draw_item(self, data: st.DataObject) -> tuple[RequestView, int]:
            """An item whose image is not held (a miss: admission, eviction) half the
            time, a held one (a hit) a quarter of the time, else any item."""
            every = self.every_item()
            held = [(req, i) for req, i in every if self.model.is_held(req.items[i].mm_hash)]
            absent = [(req, i) for req, i in every if (req, i) not in held]
            # A later occurrence of an image its request already references through
            # another item: the same image twice in one request (ECM-6).
            repeats = [
                (req, i)
                for req, i in held
                if i not in self.model.uses.get(req.request_id, {})
                and req.items[i].mm_hash in self.model.uses.get(req.request_id, {}).values()
            ]
            aim = data.draw(st.integers(0, 4), label="aim")
            pool = {0: absent, 1: absent, 2: held, 3: repeats}.get(aim, every) or every
            return pick(data, pool, "item")

        def budget_for(self, num_embeds: int, kind: str) -> int:
            return {"zero": 0, "just_below": num_embeds - 1, "exact": num_embeds}.get(
                kind, num_embeds + self.model.cache_size
            )

        # --- one step of each operation, checked --------------------------------------

        def do_check(self, req: RequestView, input_id: int) -> bool:
            """check_and_update_cache in lockstep (ECM-3)."""
            item = req.items[input_id]
            got = self.cache.check_and_update_cache(req, input_id)
            ref = self.model.check_and_update_cache(req, input_id)
            label = self.item_label(req, input_id)
            if ref is None:
                self.reached("miss")
            else:
                self.reached("hit")
                if ref.was_freeable:
                    self.reached("rereference_freeable")
                self.record_reference(ref)
            note(said_check(label, got, ref))
            ecm3_check_answer(label, item, got, ref)
            if ref is not None:
                ecm3_hit_references(self.cache, req, item)
            return ref is not None

        def do_can_allocate(
            self, req: RequestView, input_id: int, budget: int, planned: int
        ) -> bool:
            """can_allocate in lockstep: the verdict (ECM-4), what it evicts (ECM-5)."""
            n = req.items[input_id].num_embeds
            label = self.item_label(req, input_id)
            before = snapshot(self.cache)
            freeable_before = list(self.model.freeable)
            freeable_slots_before = self.model.num_freeable_slots
            got = self.cache.can_allocate(req, input_id, budget, planned)
            ok, evicted = self.model.can_allocate(n, budget, planned)
            gone = sorted(set(before[0]) - set(cached_of(self.cache)))
            note(said_can_allocate(label, budget, planned, got, gone, ok, evicted))
            if evicted:
                self.reached("eviction", len(evicted))
            ecm4_verdict(label, budget, planned, got, ok, freeable_slots_before)
            if not ok:
                ecm4_refusal_changes_nothing(self.cache, label, before)
                return False
            evicted_impl = set(before[0]) - set(cached_of(self.cache))
            ecm5_evicts_exactly(label, evicted_impl, freeable_before, evicted)
            ecm4_grant_leaves_room(self.cache, label, n, planned)
            return True

        def do_allocate(self, req: RequestView, input_id: int) -> None:
            """allocate in lockstep: the entry is held and referenced (ECM-3)."""
            item = req.items[input_id]
            self.cache.allocate(req, input_id)
            ref = self.model.allocate(req, input_id)
            self.record_reference(ref)
            note(f"{self.item_label(req, input_id)} is allocated and referenced")
            ecm3_allocated_references(self.cache, req, input_id, item)

        # --- rules --------------------------------------------------------------------

        @rule(data=st.data(), budget_kind=st.sampled_from(BUDGET_KINDS))
        def reach_item(self, data: st.DataObject, budget_kind: str) -> None:
            """What the scheduling hook does for one item: a hit is free; on a miss,
            ask for budget and space (planned: what this step already reserved) and, if
            granted, allocate at once."""
            self.reach(*self.draw_item(data), budget_kind)

        def evicted_items(self) -> list[tuple[RequestView, int]]:
            evicted = set(self.model.evicted_since_drain) - set(self.model.sizes)
            return [(r, i) for r, i in self.every_item() if r.items[i].mm_hash in evicted]

        @precondition(lambda self: bool(self.evicted_items()))
        @rule(data=st.data())
        def reach_evicted_image(self, data: st.DataObject) -> None:
            """An image evicted earlier in this step is needed again before the step's
            drain (ECM-7: the drain must not tell the worker to drop it)."""
            self.reach(*pick(data, self.evicted_items(), "evicted item"), "ample")

        def reach(self, req: RequestView, input_id: int, budget_kind: str) -> None:
            if self.do_check(req, input_id):
                return
            item = req.items[input_id]
            if item.mm_hash in {r.items[i].mm_hash for r, i in self.plan}:
                # Already being encoded this step: the hook reports a duplicate, and the
                # scheduler references it once the encode is allocated (end_step).
                self.duplicates.append((req, input_id))
                return
            budget = self.budget_for(item.num_embeds, budget_kind)
            if self.do_can_allocate(req, input_id, budget, self.planned):
                self.do_allocate(req, input_id)

        @rule(
            data=st.data(),
            budget_kind=st.sampled_from(BUDGET_KINDS),
            use_plan=st.sampled_from((True, True, True, False)),
        )
        def can_allocate(self, data: st.DataObject, budget_kind: str, use_plan: bool) -> None:
            """can_allocate alone; when granted with the step's true planned total, the
            item joins the step's plan and is allocated later by ``allocate``."""
            planned_hashes = {req.items[i].mm_hash for req, i in self.plan}
            candidates = [
                (req, i)
                for req, i in self.every_item()
                if not self.model.is_held(req.items[i].mm_hash)
                and req.items[i].mm_hash not in planned_hashes
            ] or self.every_item()
            req, input_id = pick(data, candidates, "item")
            planned = (
                None
                if use_plan
                else data.draw(st.integers(0, self.model.cache_size), label="planned")
            )
            self.plan_item(req, input_id, budget_kind, planned)

        def plan_item(
            self, req: RequestView, input_id: int, budget_kind: str, planned: int | None
        ) -> None:
            """can_allocate for one item, with the step's true planned total (``planned``
            None: the item joins the step's plan when granted) or an arbitrary one."""
            item = req.items[input_id]
            planned_hashes = {r.items[i].mm_hash for r, i in self.plan}
            budget = self.budget_for(item.num_embeds, budget_kind)
            use_plan = planned is None
            granted = self.do_can_allocate(
                req, input_id, budget, self.planned if planned is None else planned
            )
            if (
                granted
                and use_plan
                and not self.model.is_held(item.mm_hash)
                and item.mm_hash not in planned_hashes
            ):
                self.plan.append((req, input_id))
                self.planned += item.num_embeds

        def referenced_items(self) -> list[tuple[str, int]]:
            return sorted((rid, i) for rid, items in self.model.uses.items() for i in items)

        def repeated_items(self) -> list[tuple[str, int]]:
            """Referenced items whose request references the same image through another
            item too: the same image twice in one request (ECM-6)."""
            return [
                (rid, i)
                for rid, i in self.referenced_items()
                if self.model.uses_of(rid, self.model.uses[rid][i]) >= 2
            ]

        @precondition(lambda self: bool(self.model.uses))
        @rule(data=st.data())
        def free_encoder_input(self, data: st.DataObject) -> None:
            self.release(*pick(data, self.referenced_items(), "referenced item"))

        @precondition(lambda self: bool(self.repeated_items()))
        @rule(data=st.data())
        def free_one_of_repeated(self, data: st.DataObject) -> None:
            """One occurrence of a repeated image is consumed; the other still needs it."""
            self.release(*pick(data, self.repeated_items(), "repeated item"))

        def release(self, rid: str, input_id: int) -> None:
            req = next(r for r in self.requests if r.request_id == rid)
            self.cache.free_encoder_input(req, input_id)
            release = self.model.free_encoder_input(rid, input_id)
            assert release is not None
            h = release.mm_hash
            label = self.item_label(req, input_id)
            if release.still_used_by_request:
                self.reached("duplicate_in_request")
                note(f"{label} is released; {rid} still uses {h} in another item")
                ecm6_request_keeps_reference(self.cache, label, rid, h)
            elif release.became_freeable:
                note(f"{label} is released; entry {h} must become freeable (newest)")
                ecm2_released_is_newest(self.cache, self.model, label, h)
            else:
                note(f"{label} is released; other requests still reference {h}")
            ecm3_listing(
                self.model, req, listed_input_ids(self.cache, req), f"after {label} is released"
            )

        @precondition(lambda self: bool(self.model.uses))
        @rule(data=st.data())
        def free(self, data: st.DataObject) -> None:
            self.do_free(pick(data, sorted(self.model.uses), "request"))

        # Valid once the cache holds anything, for the shrinker (docs/time_to_catch.md):
        # Hypothesis orders the rules by their arguments and names, so this is the first
        # one, and a step whose choices are zeroed becomes the first rule valid there, in
        # 3 choices that a deletion pass can drop. Valid only with two running requests,
        # it left that place to ``reset`` after a lone allocation: failing programs
        # shrank to allocate-reset cycles (17 choices) that no pass deletes. With one
        # running request this is its ``free``; with none, nothing changes. Not in the
        # empty cache every run starts with, where it could only waste a step.
        @precondition(lambda self: bool(self.model.sizes))
        @rule()
        def all_finish(self) -> None:
            """Every running request finishes (the batch drains): all entries become
            freeable, in release order, and the next admissions choose among them."""
            for rid in sorted(self.model.uses):
                self.do_free(rid)

        def do_free(self, rid: str) -> None:
            """free in lockstep: references end (ECM-6), release order (ECM-2)."""
            req = next(r for r in self.requests if r.request_id == rid)
            old_order = list(self.model.freeable)
            self.cache.free(req)
            newly = self.model.free(rid)
            note(said_free(rid, newly))
            impl_order = list(self.cache.freeable)
            ecm2_free_appends(rid, old_order, impl_order, newly)
            self.model.adopt_release_order(impl_order[len(old_order) :])
            ecm6_freed_references_nothing(self.cache, rid)
            ecm3_listing(
                self.model, req, listed_input_ids(self.cache, req),
                f"after request {rid} finishes",
            )

        def do_drain(self) -> None:
            """get_freed_mm_hashes in lockstep (ECM-7)."""
            got = list(self.cache.get_freed_mm_hashes())
            optional = self.model.may_drain - set(self.model.sizes)  # from before a reset
            want = self.model.get_freed_mm_hashes()
            if want:
                self.reached("drain_freed")
            note(
                "the scheduler drains freed hashes for the worker: "
                f"get_freed_mm_hashes() -> {got}"
            )
            ecm7_drain(got, want, optional, set(self.model.sizes))

        # Only when the step has something to finish: a no-op step end would crowd out
        # the other rules (Hypothesis favours rules without arguments).
        @precondition(lambda self: bool(self.plan or self.model.evicted_since_drain))
        @rule(drain_only=st.sampled_from((False, False, True)))
        def end_step(self, drain_only: bool) -> None:
            """The end of a scheduler step: allocate what the step planned, then drain
            the freed hashes into the step's output (vLLM's ``Scheduler.schedule``).
            ``drain_only``: drain while planned items still wait for their allocation."""
            self.finish_step(drain_only)

        def finish_step(self, drain_only: bool) -> None:
            while self.plan and not drain_only:
                req, input_id = self.plan.pop(0)
                self.planned -= req.items[input_id].num_embeds
                self.do_allocate(req, input_id)
            if not self.plan:
                while self.duplicates:
                    self.do_check(*self.duplicates.pop(0))
            self.do_drain()

        # Between steps (nothing planned, the step's drain done: vLLM evicts only inside
        # Scheduler.schedule, which drains at its end), with something to forget: what
        # EngineCore.reset_encoder_cache does when the weights change (ECM-9).
        @precondition(
            lambda self: self.resettable
            and bool(self.model.sizes)
            and not self.plan
            and not self.duplicates
            and not self.model.evicted_since_drain
        )
        @rule()
        def reset(self) -> None:
            cast(ResettableEncoderCache, self.cache).reset()
            self.model.reset()
            note("the engine resets the encoder cache (new weights): reset()")
            ecm9_reset_forgets(self.cache, self.model, self.requests)

        # --- the invariant: one checker per clause (encoder_cache_invariants) ----------

        @invariant()
        def agrees_with_model(self) -> None:
            """Every clause that holds of the state after any step, one checker each."""
            if self.impl is None:
                return
            free, freeable_slots = self.cache.num_free_slots, self.cache.num_freeable_slots
            note(f"the cache must now be: {fmt_cache(self.model)}")
            ecm1_slots(self.model, free, freeable_slots)
            ecm3_cached(self.cache, self.model)
            for req, listed in each_listing(self.cache, self.requests):
                ecm6_items_covered(self.model, req, listed)
                ecm3_listing(self.model, req, listed, "now")
            ecm2_freeable_order(self.cache, self.model)
            if self.bookkeeping:
                ecm8_bookkeeping(self.cache, self.model)

    # At least 200 runs: under some seeds 100 runs reach a declared transition
    # (``duplicate_in_request``) fewer than 5 times (seed 272420487: 2), VACUOUS in the
    # seed sweep (issue 19). The machine is fast (about 1 s in ``ci``).
    return machine(EncoderCacheMachine, min_programs=200)

"""``EncoderDecoderCacheMachine``: the encoder-decoder cache manager against its model
(ECD-1..6).

The machine drives the implementation the way vLLM's ``Scheduler`` drives it for a
cross-attention model: a waiting request is admitted when ``can_allocate`` grants each
of its inputs (the encoder budget left and the embeddings the request already planned),
and its inputs are then allocated; at the end of each step the scheduler drains
``get_freed_mm_hashes`` for the worker; after a step, ``_free_encoder_inputs`` releases
every input ``get_cached_input_ids`` lists — on every later step again, as the
scheduler does once the request has computed a token; finished, aborted and preempted
requests are ``free``\\ d, whether they allocated anything or not. Besides, single
releases, lone ``can_allocate`` calls with any planned total, and
``check_and_update_cache`` (which the Protocol's callers may ask). The trusted model
(:mod:`properties.models.encoder_decoder_cache`) takes every step in lockstep; each
operation is judged by its clause, and after each step the invariant compares the two.
Transitions are recorded from the model's state changes (SPEC.md "## Transitions").

The rest is apart, each readable alone: :mod:`properties.encoder_decoder_cache_scenarios`
(the universe and the optional ``reset``), :mod:`properties.encoder_decoder_cache_invariants`
(one group of checks per clause) and :mod:`properties.encoder_decoder_cache_narration`.
"""

from __future__ import annotations

from typing import cast

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from properties.encoder_cache_scenarios import pick
from properties.encoder_decoder_cache_invariants import (
    ecd1_allocation_charges,
    ecd1_slots,
    ecd2_every_listing,
    ecd2_free,
    ecd2_listing,
    ecd2_release,
    ecd3_allocation_is_own,
    ecd3_check_misses,
    ecd4_changes_nothing,
    ecd4_verdict,
    ecd5_drain,
    ecd6_reset_releases,
    snapshot,
)
from properties.encoder_decoder_cache_narration import (
    fmt_state,
    item_label,
    said_can_allocate,
    said_release,
)
from properties.encoder_decoder_cache_scenarios import (
    BUDGET_KINDS,
    RESET,
    EncDecScenario,
    budget_for,
    encdec_scenarios,
    provides,
    reset_probe,
)
from properties.framework import (
    Parts,
    Runnable,
    TransitionRecorder,
    clause_property,
    is_set_aside,
    machine,
    note,
)
from properties.models.encoder_decoder_cache import EncoderDecoderCacheModel
from spec.components import EncoderDecoderCacheManager, ResettableEncoderCache
from spec.types import RequestView

ECD_CLAUSES = ("ECD-1", "ECD-2", "ECD-3", "ECD-4", "ECD-5", "ECD-6")


@clause_property(
    "EncoderDecoderCacheMachine",
    ECD_CLAUSES,
    subject=("encoder_decoder_cache_manager",),
    capabilities=(("ECD-6", reset_probe),),
)
def encoder_decoder_cache_machine(parts: Parts) -> Runnable:
    """ECD-1..6: the implementation and the model in lockstep (ECD-6 where the
    implementation has ``reset()``)."""
    factory = parts.encoder_decoder_cache_manager

    class EncoderDecoderCacheMachine(TransitionRecorder, RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.requests: tuple[RequestView, ...] = ()
            self.impl: EncoderDecoderCacheManager | None = None
            self.model = EncoderDecoderCacheModel(0)
            self.resettable = False
            #: requests an allocation of which was released: past their first step
            self.released: set[str] = set()

        @initialize(scenario=encdec_scenarios())
        def setup(self, scenario: EncDecScenario) -> None:
            self.requests = scenario.requests
            self.impl = factory(scenario.cache_size)
            self.model = EncoderDecoderCacheModel(scenario.cache_size)
            self.resettable = provides(self.impl, RESET)
            sizes = ", ".join(f"{x.mm_hash}={x.num_embeds}" for x in scenario.inputs)
            note(f"encoder-decoder cache of {scenario.cache_size} embeddings; inputs {sizes}")
            for req in self.requests:
                inputs = " ".join(x.mm_hash for x in req.items)
                note(f"request {req.request_id} has inputs [{inputs}]")

        @property
        def cache(self) -> EncoderDecoderCacheManager:
            assert self.impl is not None, "setup runs first"
            return self.impl

        def request(self, rid: str) -> RequestView:
            return next(r for r in self.requests if r.request_id == rid)

        def every_item(self) -> list[tuple[RequestView, int]]:
            return [(req, i) for req in self.requests for i in range(len(req.items))]

        def holders(self) -> list[RequestView]:
            return [r for r in self.requests if self.model.cached_input_ids(r.request_id)]

        # --- one operation of each kind, checked ------------------------------------------

        def do_can_allocate(
            self, req: RequestView, input_id: int, budget: int, planned: int
        ) -> bool:
            """can_allocate in lockstep: the verdict, and nothing changed (ECD-4)."""
            n = req.items[input_id].num_embeds
            label = item_label(req, input_id)
            free = self.model.num_free_slots
            before = snapshot(self.cache, self.requests)
            got = self.cache.can_allocate(req, input_id, budget, planned)
            ok = self.model.can_allocate(n, budget, planned)
            if not ok and n <= budget:
                self.reached("refused_for_space")
            note(said_can_allocate(label, budget, planned, got, ok))
            ecd4_verdict(label, budget, planned, free, got, ok)
            ecd4_changes_nothing(label, before, snapshot(self.cache, self.requests))
            return ok

        def do_allocate(self, req: RequestView, input_id: int) -> None:
            """allocate in lockstep: it charges its own embeddings (ECD-1, ECD-3)."""
            label = item_label(req, input_id)
            shared = req.items[input_id].mm_hash in self.model.live_hashes()
            before = self.cache.num_free_slots
            self.cache.allocate(req, input_id)
            allocation = self.model.allocate(req, input_id)
            after = self.cache.num_free_slots
            self.reached("allocation")
            note(f"{label} is allocated: num_free_slots {before} -> {after}")
            if shared:
                self.reached("same_hash_allocated")
                ecd3_allocation_is_own(label, before, after, allocation)
            else:
                ecd1_allocation_charges(label, before, after, allocation)

        def judges_redundant_releases(self, req: RequestView, input_ids: list[int]) -> bool:
            """Whether to release these items of ``req`` although one of them holds no
            allocation: not while ECD-2 is set aside (it failed). Such a release can
            judge only ECD-2, and each would reject its test case (the per-clause rerun
            would mostly generate runs it throws away)."""
            rid = req.request_id
            redundant = any(not self.model.holds(rid, i) for i in input_ids)
            return not (redundant and is_set_aside("ECD-2"))

        def do_release(self, req: RequestView, input_id: int) -> None:
            """free_encoder_input in lockstep (ECD-2)."""
            if not self.judges_redundant_releases(req, [input_id]):
                return
            before = self.cache.num_free_slots
            self.cache.free_encoder_input(req, input_id)
            released = self.model.release(req.request_id, input_id)
            after = self.cache.num_free_slots
            self.reached("release" if released is not None else "redundant_release")
            if released is not None:
                self.released.add(req.request_id)
            label = item_label(req, input_id)
            note(said_release(label, before, after, released is not None))
            ecd2_release(label, before, after, released)

        def do_free(self, req: RequestView) -> None:
            """free in lockstep: exactly the request's live allocations (ECD-2)."""
            rid = req.request_id
            if not self.judges_redundant_releases(req, list(range(len(req.items)))):
                return  # an implementation may release every item, as vLLM's does
            held_ids = sorted(self.model.cached_input_ids(rid))
            held = [self.model.allocations[rid, i] for i in held_ids]
            before = self.cache.num_free_slots
            self.cache.free(req)
            self.model.free(rid)
            after = self.cache.num_free_slots
            for _ in held:
                self.reached("release")
                self.released.add(rid)
            if not held:
                self.reached("redundant_release")
            note(f"request {rid} finishes (free): num_free_slots {before} -> {after}")
            ecd2_free(rid, before, after, held)

        # --- rules ------------------------------------------------------------------------
        # The releases run while something is allocated (else each would be a no-op and,
        # as Hypothesis enables a random subset of the rules per run, they would crowd
        # out the admissions); they still release items holding nothing, a quarter of
        # the time, and the same requests again and again.

        def waiting(self) -> list[RequestView]:
            return [r for r in self.requests if not self.model.cached_input_ids(r.request_id)]

        def fitting_first(self, requests: list[RequestView]) -> list[RequestView]:
            """``requests``, those whose inputs fit the free slots together first (each
            group in request order)."""
            free = self.model.num_free_slots
            return sorted(requests, key=lambda r: sum(x.num_embeds for x in r.items) > free)

        def waiting_with_live_input(self) -> list[RequestView]:
            """Waiting requests with an input a live allocation carries (ECD-3)."""
            live = self.model.live_hashes()
            return [r for r in self.waiting() if any(x.mm_hash in live for x in r.items)]

        # Any waiting request, those that fit the free slots first, for the shrinker
        # (docs/time_to_catch.md): Hypothesis deletes at most 5 consecutive choices at a
        # time, and on an empty cache this is the only valid rule, drawn through the rule
        # filter's fallback, so each step costs 9 choices. In request order a step whose
        # choices are zeroed admitted ``r1``; where ``r1`` can never fit (two inputs of a
        # one-slot cache), such steps changed nothing and none could go: failing programs
        # kept five of them (ecd_hit_on_live_hash: 8 steps). A zeroed admission (its
        # budget "ample") now allocates wherever some waiting request fits.
        @precondition(lambda self: bool(self.waiting()))
        @rule(data=st.data(), budget_kind=st.sampled_from(BUDGET_KINDS))
        def admit(self, data: st.DataObject, budget_kind: str) -> None:
            """A waiting request (it holds no allocation) at its first step: each input
            asks for budget and space, planning the request's earlier inputs; if every
            one is granted, all are allocated, else the request waits."""
            waiting = self.fitting_first(self.waiting())
            self.admit_request(pick(data, waiting, "waiting request"), budget_kind)

        @precondition(lambda self: bool(self.waiting_with_live_input()))
        @rule(data=st.data())
        def admit_same_input(self, data: st.DataObject) -> None:
            """A waiting request whose input equals a running request's (the same audio
            sent twice): it is encoded and charged again (ECD-3)."""
            self.admit_request(pick(data, self.waiting_with_live_input(), "request"), "ample")

        def admit_request(self, req: RequestView, budget_kind: str) -> None:
            planned = 0
            for input_id, item in enumerate(req.items):
                budget = budget_for(item.num_embeds, budget_kind, self.model.cache_size)
                if not self.do_can_allocate(req, input_id, budget, planned):
                    note(f"request {req.request_id} waits")
                    return
                planned += item.num_embeds
            for input_id in range(len(req.items)):
                self.do_allocate(req, input_id)

        @precondition(lambda self: bool(self.model.allocations))
        @rule(
            data=st.data(),
            budget_kind=st.sampled_from(BUDGET_KINDS),
            planned=st.integers(0, 6),
        )
        def can_allocate(self, data: st.DataObject, budget_kind: str, planned: int) -> None:
            """can_allocate alone, with any planned total, while something is allocated:
            it must change nothing."""
            req, input_id = pick(data, self.every_item(), "item")
            budget = budget_for(req.items[input_id].num_embeds, budget_kind, self.model.cache_size)
            self.do_can_allocate(req, input_id, budget, planned)

        @precondition(lambda self: bool(self.model.allocations))
        @rule(data=st.data())
        def check_and_update_cache(self, data: st.DataObject) -> None:
            """A caller asks for a hit on an input a live allocation carries: never a
            hit, nothing changes (ECD-3)."""
            live = self.model.live_hashes()
            carrying = [(r, i) for r, i in self.every_item() if r.items[i].mm_hash in live]
            req, input_id = pick(data, carrying, "item")
            self.reached("check_live_hash")
            label = item_label(req, input_id)
            before = snapshot(self.cache, self.requests)
            got = self.cache.check_and_update_cache(req, input_id)
            note(f"{label} checks the cache: {'hit' if got else 'miss'}")
            ecd3_check_misses(label, got, before, snapshot(self.cache, self.requests))

        @precondition(lambda self: bool(self.model.allocations))
        @rule(data=st.data())
        def release_listed(self, data: st.DataObject) -> None:
            """After a step: ``Scheduler._free_encoder_inputs`` releases every input
            ``get_cached_input_ids`` lists (a request holding an allocation, three
            times in four; again on every later step)."""
            holders = self.holders()
            aim = data.draw(st.integers(0, 3), label="aim at a holder") > 0
            req = pick(data, holders if aim and holders else list(self.requests), "request")
            listed = sorted(self.cache.get_cached_input_ids(req))
            note(f"the scheduler releases the inputs of {req.request_id} it lists: {listed}")
            ecd2_listing(self.cache, self.model, req, "before the release")
            for input_id in listed:
                self.do_release(req, input_id)

        @precondition(lambda self: bool(self.model.allocations))
        @rule(data=st.data())
        def free_encoder_input(self, data: st.DataObject) -> None:
            """One input released: one holding an allocation, three times in four."""
            held = [(r, i) for r, i in self.every_item() if self.model.holds(r.request_id, i)]
            aim = data.draw(st.integers(0, 3), label="aim at an allocation") > 0
            self.do_release(*pick(data, held if aim and held else self.every_item(), "item"))

        @precondition(lambda self: bool(self.model.allocations))
        @rule(data=st.data())
        def free(self, data: st.DataObject) -> None:
            """A request finishes, is aborted or preempted, or fails to get KV blocks
            after its inputs were granted: a holder, three times in four."""
            holders = self.holders()
            aim = data.draw(st.integers(0, 3), label="aim") > 0
            self.do_free(pick(data, holders if aim and holders else list(self.requests), "request"))

        @precondition(lambda self: bool(self.released))
        @rule(data=st.data(), finishes=st.booleans())
        def release_again(self, data: st.DataObject, finishes: bool) -> None:
            """A request past its first step is released again: ``_free_encoder_inputs``
            releases every input the listing names on every step (ECD-2 lets it name
            inputs released already), and ``free`` follows when it finishes."""
            req = self.request(pick(data, sorted(self.released), "request"))
            note(f"the scheduler releases every input of {req.request_id} again")
            for input_id in range(len(req.items)):
                self.do_release(req, input_id)
            if finishes:
                self.do_free(req)

        @precondition(lambda self: len(self.holders()) >= 2)
        @rule()
        def all_finish(self) -> None:
            """Every running request finishes (the batch drains)."""
            for req in self.holders():
                self.do_free(req)

        # Only when the step has something the drains must carry: a no-op step would crowd
        # out the other rules (Hypothesis favours rules without arguments).
        @precondition(lambda self: bool(self.model.allocated_this_step or self.model.to_report))
        @rule()
        def end_step(self) -> None:
            """The end of ``Scheduler.schedule``: the drain goes into the step's output."""
            got = list(self.cache.get_freed_mm_hashes())
            required = self.model.drain()
            if required:
                self.reached("drain_reports")
            note(f"the scheduler drains the freed hashes: get_freed_mm_hashes() -> {got}")
            ecd5_drain(got, required)

        # Between steps (this step allocated nothing since its drain), with something to
        # forget: what EngineCore.reset_encoder_cache does when the weights change (ECD-6).
        @precondition(
            lambda self: self.resettable
            and not self.model.allocated_this_step
            and bool(self.model.allocations or self.model.to_report)
        )
        @rule()
        def reset(self) -> None:
            cast(ResettableEncoderCache, self.cache).reset()
            self.model.reset()
            note("the engine resets the encoder cache (new weights): reset()")
            ecd6_reset_releases(self.cache, self.model)

        # --- the invariant --------------------------------------------------------------

        @invariant()
        def agrees_with_model(self) -> None:
            if self.impl is None:
                return
            note(f"the manager must now be: {fmt_state(self.model)}")
            ecd1_slots(self.model, self.cache.num_free_slots)
            ecd2_every_listing(self.cache, self.model, self.requests, "now")

    return machine(EncoderDecoderCacheMachine)

"""``EngineResetMachine``: the engine machine with resets and weight updates between its
steps (SYS-11, SYS-12).

``EngineMachine`` (:mod:`properties.engine_machine`) with three more rules, each valid
where the engine has the capability (:class:`spec.components.ResettableEngine`,
:class:`spec.components.WeightUpdatableEngine`): ``reset_encoder_cache``,
``reset_prefix_cache`` and ``update_weights``, called between steps with requests in
flight — in the middle of an image, decoding, waiting after a preemption — as vLLM's
engine core takes them between two ``step()``\\ s.

What each operation promises is checked right after it and from then on
(:mod:`properties.engine_reset_invariants`): a reset encoder cache is empty and every row
served later was encoded after it; a prefix reset answers truly, and a later prefix hit
serves only KV some request computed after it; after a weight update every computed
position is at the new weights version and every row served is the new version's.
Every engine invariant of SYS-1..10 keeps running too, as in ``EngineMachine``, and
reports its own clause: a reset that leaves the worker holding what the scheduler
forgot fails SYS-11 (its own check, right after the reset) *and* SYS-5 (on the next
check of the accounting) — where a defect of the engine shows only around a reset, the
clause it breaks says what broke, and the per-clause reruns (the failing clause set
aside) judge the reset clauses on the runs where the rest holds. An engine with neither
capability runs nothing here: every clause of this machine is "not provided" for it,
and ``EngineMachine`` judges SYS-1..10 alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from properties.engine_machine import (
    ENGINE_MIN_PROGRAMS,
    ENGINE_SUBJECT,
    ENGINE_USES,
    SYS_CLAUSES,
    engine_machine_class,
)
from properties.engine_reset_invariants import (
    sys11_encoder_cache_forgotten,
    sys11_prefix_hit_recomputed,
    sys11_prefix_reset_answer,
    sys11_served_encoded_after_reset,
    sys12_kv_at_current_weights,
    sys12_rows_at_current_weights,
)
from properties.engine_strategies import MAX_LIVE, pick
from properties.framework import (
    Parts,
    Runnable,
    clause_property,
    machine,
    note,
    probed_engine,
)
from properties.models.engine import RequestFacts, RequestProgress
from spec.components import (
    EngineSnapshot,
    KVSource,
    ResettableEngine,
    StepOutput,
    WeightUpdatableEngine,
)
from spec.types import EngineConfig

RESET_CLAUSES = ("SYS-11", "SYS-12")


def resets_probe(parts: Parts) -> str | None:
    """Why the engine cannot reset its caches (None: it can). A fresh engine is reset
    once: the reference loop around a cache manager without ``reset()`` says it cannot
    by raising ``NotImplementedError`` (as does a method still marked ``@todo``). Any
    other exception, and a factory that gives no engine, propagates: an error, never a
    capability the engine lacks (issue 32)."""
    engine = probed_engine(parts, EngineConfig())
    if not (isinstance(engine, ResettableEngine) and _callable(engine, ResettableEngine)):
        return (
            "the engine loop does not provide reset_encoder_cache() and "
            "reset_prefix_cache() (SYS-11)"
        )
    try:
        engine.reset_encoder_cache()
        engine.reset_prefix_cache()
    except NotImplementedError as e:
        return f"the engine loop's resets are not implemented: {e} (SYS-11)"
    return None


def _callable(engine: object, capability: type) -> bool:
    """Whether every method of ``capability`` is callable on ``engine`` (an adapter may
    set one to None where the wrapped code lacks it)."""
    names = [n for n in vars(capability) if not n.startswith("_")]
    return all(callable(getattr(engine, name, None)) for name in names)


def resets_or_updates_probe(parts: Parts) -> str | None:
    """Why this machine has nothing to add to ``EngineMachine`` (None: the engine has
    resets or weight updates, and SYS-1..10 are judged across them)."""
    no_resets, no_updates = resets_probe(parts), weights_probe(parts)
    if no_resets and no_updates:
        return f"{no_resets}; {no_updates}: EngineMachine judges this clause alone"
    return None


def weights_probe(parts: Parts) -> str | None:
    """Why the engine cannot update its weights (None: it can); as :func:`resets_probe`
    (the reference loop's update resets the encoder cache, so it too raises
    ``NotImplementedError`` around a cache manager without ``reset()``)."""
    engine = probed_engine(parts, EngineConfig())
    if not (isinstance(engine, WeightUpdatableEngine) and _callable(engine, WeightUpdatableEngine)):
        return "the engine loop does not provide update_weights() (SYS-12)"
    try:
        engine.update_weights()
    except NotImplementedError as e:
        return f"the engine loop's weight update is not implemented: {e} (SYS-12)"
    return None


@clause_property(
    "EngineResetMachine",
    (*SYS_CLAUSES, *RESET_CLAUSES),
    subject=ENGINE_SUBJECT,
    uses=ENGINE_USES,
    subject_any=True,
    capabilities=(
        *((clause, resets_or_updates_probe) for clause in SYS_CLAUSES),
        ("SYS-11", resets_probe),
        ("SYS-12", weights_probe),
    ),
)
def engine_reset_machine(parts: Parts) -> Runnable:
    """SYS-1..12: the engine machine with resets and weight updates between steps
    (where the engine has them; with neither, nothing runs: every clause of it is not
    provided)."""
    can_reset = resets_probe(parts) is None
    can_update = weights_probe(parts) is None
    if not (can_reset or can_update):
        # no machine name: no transition is owed by a run that judges nothing
        return Runnable(run=lambda settings: None)
    built = engine_reset_machine_class(parts, can_reset, can_update)
    return machine(built, min_programs=ENGINE_MIN_PROGRAMS)


def engine_reset_machine_class(parts: Parts, can_reset: bool, can_update: bool) -> type[Any]:
    base: Any = engine_machine_class(parts)

    class EngineResetMachine(base):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            #: hashes encoded since the latest reset_encoder_cache() (None: no reset yet)
            self.encoded_since_reset: set[str] | None = None
            #: since the latest successful reset_prefix_cache() (None: none yet): the
            #: contents of whole-block prefixes computed since, and the requests whose
            #: computed KV is all from since (or from a hit on such a prefix)
            self.prefixes_since_reset: set[tuple[KVSource, ...]] | None = None
            self.requests_since_reset: set[str] = set()


        # --- the operations ------------------------------------------------------------

        def running_mid_image(self) -> bool:
            """Whether a running request is in the middle of an image's rows."""
            for request_id, progress in self.model.progress.items():
                facts = self.model.facts[request_id]
                for index in progress.touched:
                    if any(p >= progress.computed for p in facts.embed_positions(index)):
                        return True
            return False

        @precondition(lambda self: can_reset and bool(self.model.live))
        @rule()
        def reset_encoder_cache(self) -> None:
            self.reset_encoder_cache_now()

        # The in-flight reset the upstream warning is about, aimed: a request is between
        # two chunks of an image after a few steps in a hundred, mostly inside a drain,
        # so a reset drawn among the other rules would land there too rarely to count.
        @precondition(lambda self: can_reset and bool(self.model.live))
        @rule()
        def reset_encoder_cache_mid_image(self) -> None:
            """Steps (at most 4) until a running request is in the middle of an image,
            then the reset."""
            for _ in range(4):
                if self.running_mid_image() or not self.model.live:
                    break
                self.run_step()
            self.reset_encoder_cache_now()

        def reset_encoder_cache_now(self) -> None:
            if self.running_mid_image():
                self.reached("encoder_reset_in_flight")
            note("reset_encoder_cache()")
            self.eng.reset_encoder_cache()
            self.encoded_since_reset = set()
            for progress in self.model.progress.values():
                progress.touched = set()  # references are taken again when read again
            self.solo = None
            after = self.eng.snapshot()
            sys11_encoder_cache_forgotten(self.config, after, self.label)
            self.check_resources(after, freed=())
            self.check_snapshot(after)

        @precondition(lambda self: can_reset)
        @rule()
        def reset_prefix_cache(self) -> None:
            self.reset_prefix_cache_now()

        # Aimed, for the shrinker as much as for the search: the reset a running request
        # straddles, then a request for the same prompt, which a prefix hit would serve
        # from blocks computed before the reset. Drawn apart, a failing program kept the
        # arrivals and drains that led there (9 steps; docs/time_to_catch.md).
        @precondition(
            lambda self: can_reset
            and len(self.model.live) < MAX_LIVE
            and any(p.running for p in self.model.progress.values())
        )
        @rule(data=st.data())
        def reset_prefix_cache_then_repeat(self, data: st.DataObject) -> None:
            """A prefix reset with a request running, then its prompt again."""
            running = sorted(r for r, p in self.model.progress.items() if p.running)
            request_id = pick(data, running, "running request")
            self.reset_prefix_cache_now()
            facts = self.model.facts[request_id]
            self.add_prompt(self.prompt_of[request_id], facts.request.max_new_tokens)

        def reset_prefix_cache_now(self) -> None:
            before = self.eng.snapshot()
            reset = self.eng.reset_prefix_cache()
            note(f"reset_prefix_cache() -> {reset!r}")
            after = self.eng.snapshot()
            sys11_prefix_reset_answer(before, reset, after)
            if reset is True:
                self.reached("prefix_reset")
                self.prefixes_since_reset = set()
                self.requests_since_reset = set()
            else:
                self.reached("prefix_reset_refused")
            self.check_resources(after, freed=())
            self.check_snapshot(after)

        @precondition(lambda self: can_update and bool(self.model.live))
        @rule()
        def update_weights(self) -> None:
            running = [rid for rid, p in self.model.progress.items() if p.running]
            if running:
                self.reached("weights_update_in_flight")
            note(f"update_weights() -> weights version {self.weights_version + 1}")
            self.eng.update_weights()
            self.weights_version += 1
            for request_id in running:  # recomputed at the new weights (SYS-12)
                self.model.progress[request_id].reset()
            self.solo = None
            after = self.eng.snapshot()
            self.check_resources(after, freed=())
            self.check_snapshot(after)

        # --- the engine machine's checks, and these clauses' ---------------------------

        def check_step(
            self,
            live_before: list[str],
            before: EngineSnapshot,
            out: StepOutput,
            after: EngineSnapshot,
        ) -> None:
            starting = {
                c.request_id for c in out.chunks if self.model.progress[c.request_id].start is None
            }
            if self.encoded_since_reset is not None:
                self.encoded_since_reset |= set(out.encoded_mm_hashes)
            super().check_step(live_before, before, out, after)
            if self.prefixes_since_reset is not None:
                self.follow_prefixes(before, out, starting)

        def follow_prefixes(
            self, before: EngineSnapshot, out: StepOutput, starting: set[str]
        ) -> None:
            """SYS-11 after a prefix reset: a request starting at a hit starts on a
            prefix computed since; whole blocks computed since become hittable."""
            assert self.prefixes_since_reset is not None
            block_size = self.config.block_size
            for chunk in out.chunks:
                request_id = chunk.request_id
                facts = self.model.facts[request_id]
                outputs = before.requests[request_id].output_token_ids
                start = chunk.num_computed_tokens
                end = start + chunk.num_new_tokens
                if request_id in starting:
                    fresh = start == 0
                    if start > 0:
                        self.reached("hit_after_prefix_reset")
                        fresh = contents(facts, outputs, start) in self.prefixes_since_reset
                        sys11_prefix_hit_recomputed(self.steps, request_id, start, fresh)
                    if fresh:
                        self.requests_since_reset.add(request_id)
                if request_id in self.requests_since_reset:
                    for blocks in range(start // block_size + 1, end // block_size + 1):
                        self.prefixes_since_reset.add(
                            contents(facts, outputs, blocks * block_size)
                        )

        def check_gathered(
            self,
            facts: RequestFacts,
            progress: RequestProgress,
            start: int,
            new: int,
            gathered: Sequence[object],
        ) -> None:
            expected = facts.gathers_in(start, start + new)
            for (index, encoded), got in zip(expected, gathered, strict=False):
                if self.encoded_since_reset is not None:
                    self.reached("served_after_encoder_reset")
                    sys11_served_encoded_after_reset(
                        self.steps, facts.request_id, facts.labels[index],
                        facts.request.items[index].mm_hash, self.encoded_since_reset,
                    )
                if can_update:
                    sys12_rows_at_current_weights(
                        self.steps, facts.request_id, facts.labels[index], encoded, got,
                        self.weights_version,
                    )
            super().check_gathered(facts, progress, start, new, gathered)

        def check_snapshot(self, after: EngineSnapshot) -> None:
            if can_update:
                for request_id, snap in after.requests.items():
                    sys12_kv_at_current_weights(request_id, snap, self.weights_version)
            super().check_snapshot(after)

    return EngineResetMachine


def contents(facts: RequestFacts, outputs: Sequence[int], length: int) -> tuple[KVSource, ...]:
    """What the request's first ``length`` positions are computed from: two prefixes with
    the same contents are the only ones a correct prefix hit can stand for."""
    return tuple(facts.source_at(position, outputs) for position in range(length))

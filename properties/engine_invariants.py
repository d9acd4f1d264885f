"""The checks of ``EngineMachine``, one group per clause (SYS-1..10), each readable as
its clause in SPEC.md: the engine's step output and snapshot against the model
(:mod:`properties.models.engine`), which knows what each request must be served and
computed from but not which schedule the engine picks.

Every function checks one clause only. A clause checked at several moments (SYS-10:
the step's requests, each chunk, the finished set, the snapshot) has one function per
moment, so that the machine (:mod:`properties.engine_machine`) calls them in the order
it always has: the order in which they run is the order a failure is reported in, so
that a run breaking two clauses reports the same one every time.

Every violation goes through ``check``, so a clause the runner sets aside rejects the
test case instead of failing it (SYS-1's missed embedding, SYS-6's foreign KV source
and SYS-9's refused lowest config raised directly before the split, and so failed a
rerun that had set their clause aside).

Over 400 lines because SYS has ten clauses, most checked at several moments of a step,
each message spelled out in full (a counterexample's words); split further, the SYS
section of SPEC.md would no longer have one module to read beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from properties.engine_narration import fmt_source
from properties.framework import check, expect_error
from properties.models.engine import (
    EngineModel,
    RequestFacts,
    RequestProgress,
    ceil_div,
)
from spec.components import (
    EngineLoop,
    EngineSnapshot,
    RequestSnapshot,
    ScheduledChunk,
    StepOutput,
)
from spec.errors import (
    AdmissionError,
    InvalidInputError,
    MissingEmbeddingError,
    UnknownRequestError,
)
from spec.types import HYBRID_STATE_BLOCKS, EngineConfig, EngineRequest
from spec.weights import rows_at_weights_version

#: An image's name in the scenario ("A", "B", ...) from its content hash.
Label = Callable[[str], str]


# --- SYS-1: the worker never misses -------------------------------------------------------


def sys1_step_serves_everything(engine: EngineLoop, step: int) -> StepOutput:
    """Run one step: no ``MissingEmbeddingError`` escapes it."""
    try:
        return engine.step()
    except MissingEmbeddingError as e:
        check(False, "SYS-1", f"step {step}: the worker missed an embedding: {e}")
        raise AssertionError("unreachable: check(False, ...) raises or rejects") from e


def sys1_items_served(
    step: int,
    request_id: str,
    start: int,
    new: int,
    expected: Sequence[object],
    gathered: Sequence[object],
) -> None:
    """One array for each item whose ``is_embed`` positions the chunk includes."""
    check(
        len(gathered) == len(expected),
        "SYS-1",
        f"step {step}: {request_id}'s chunk [{start}, {start + new}) needs rows "
        f"of {len(expected)} items, the worker served {len(gathered)}",
    )


def sys1_item_rows_served(
    step: int,
    facts: RequestFacts,
    index: int,
    rows: NDArray[Any],
    got: object,
    start: int,
    new: int,
) -> None:
    """The array for item ``index`` has exactly as many rows as the chunk reads of it."""
    label = facts.labels[index]
    shape = getattr(got, "shape", None)
    check(
        isinstance(got, np.ndarray) and got.ndim == 2 and got.shape[0] == len(rows),
        "SYS-1",
        f"step {step}: {facts.request_id} needs {len(rows)} rows of image {label} "
        f"for [{start}, {start + new}), the worker served shape {shape}",
    )


# --- SYS-2: the chunks concatenate to the unchunked splice ---------------------------------


def sys2_item_rows_exact(
    step: int,
    facts: RequestFacts,
    index: int,
    rows: NDArray[Any],
    got: NDArray[Any],
    start: int,
    new: int,
) -> None:
    """The rows served for item ``index`` are its own embedding rows, bitwise."""
    check(
        got.shape == rows.shape and bool(np.array_equal(got, rows)),
        "SYS-2",
        f"step {step}: the rows gathered for {facts.request_id}'s image "
        f"{facts.labels[index]} over [{start}, {start + new}) are not that image's "
        "embedding rows",
    )


def sys2_splice(
    step: int,
    facts: RequestFacts,
    start: int | None,
    gathered: Sequence[NDArray[Any]],
    weights_version: int = 0,
) -> None:
    """At the end of a prefill: the rows gathered across its chunks are the unchunked
    splice of the prompt from the first position it computed (at the weights version
    of the engine: SYS-12)."""
    first = 0 if start is None else start
    expected = rows_at_weights_version(facts.splice_rows(first), weights_version)
    got = (
        np.concatenate(list(gathered))
        if gathered
        else np.zeros((0, expected.shape[1]), np.float32)
    )
    check(
        got.shape == expected.shape and bool(np.array_equal(got, expected)),
        "SYS-2",
        f"step {step}: the rows gathered across {facts.request_id}'s chunks "
        f"({got.shape[0]}) differ from its unchunked splice from position {first} "
        f"({expected.shape[0]} rows)",
    )


# --- SYS-3: encode once, and only what a chunk consumes ------------------------------------


def sys3_encodes_once(
    step: int,
    before: EngineSnapshot,
    out: StepOutput,
    after: EngineSnapshot,
    label: Label,
    scheduled_from: EngineSnapshot | None = None,
    preempted_then: Sequence[str] | None = None,
) -> None:
    """Each hash at most once, the encoder run once per encode, and never a hash the
    cache held with a reference at the start of the step (but by a preempted request).
    With async scheduling the step executed was scheduled from ``scheduled_from``, with
    ``preempted_then`` preempted (the previous call's)."""
    encoded = list(out.encoded_mm_hashes)
    names = "+".join(map(label, encoded))
    check(
        len(set(encoded)) == len(encoded),
        "SYS-3",
        f"step {step} encodes the same content twice: {names}",
    )
    calls = after.encoder_num_calls - before.encoder_num_calls
    check(
        calls == len(encoded),
        "SYS-3",
        f"step {step} reports {len(encoded)} encodes ({names}) but the encoder "
        f"ran {calls} times",
    )
    preempted = set(out.preempted if preempted_then is None else preempted_then)
    start = before if scheduled_from is None else scheduled_from
    for mm_hash in encoded:
        holders = set(start.encoder_cache_refs.get(mm_hash, frozenset())) - preempted
        check(
            not holders,
            "SYS-3",
            f"step {step} re-encodes {label(mm_hash)}, whose output the "
            f"cache holds for {sorted(holders)}",
        )


def sys3_encodes_only_consumed(
    step: int,
    out: StepOutput,
    facts_of: Mapping[str, RequestFacts],
    label: Label,
    lookahead: int = 0,
) -> None:
    """Every encode serves an item one of this step's chunks consumes — with a drafter
    (``lookahead`` 1), over the window its look-ahead reads too — and the chunks'
    ``encoder_inputs`` name exactly the encoded hashes."""
    encoded = list(out.encoded_mm_hashes)
    names = "+".join(map(label, encoded))
    consumed: set[str] = set()
    declared: set[str] = set()
    for chunk in out.chunks:
        facts = facts_of[chunk.request_id]
        start = chunk.num_computed_tokens
        end = start + chunk.num_new_tokens + lookahead
        for index, _rows in facts.gathers_in(start, end):
            consumed.add(facts.request.items[index].mm_hash)
        for index in chunk.encoder_inputs:
            check(
                0 <= index < len(facts.request.items),
                "SYS-3",
                f"step {step}: {chunk.request_id} has no item {index} to encode",
            )
            declared.add(facts.request.items[index].mm_hash)
    check(
        declared == set(encoded),
        "SYS-3",
        f"step {step}: chunks declare encodes of "
        f"{sorted(map(label, declared))} but the step encoded {names}",
    )
    useless = set(encoded) - consumed
    check(
        not useless,
        "SYS-3",
        f"step {step} encodes {sorted(map(label, useless))}, which no chunk "
        "of the step consumes",
    )


# --- SYS-4: per-step budgets ---------------------------------------------------------------


def sys4_budgets(
    step: int,
    config: EngineConfig,
    tokens: int,
    encoded: Sequence[str],
    num_embeds_by_hash: Mapping[str, int],
    label: Label,
) -> None:
    """The step's chunks total at most ``T`` tokens (``tokens``), its encodes at most
    ``E`` embeddings."""
    check(
        tokens <= config.token_budget,
        "SYS-4",
        f"step {step} computes {tokens} tokens, token budget {config.token_budget}",
    )
    embeds = sum(num_embeds_by_hash.get(h, 0) for h in encoded)
    check(
        embeds <= config.encoder_compute_budget,
        "SYS-4",
        f"step {step} encodes {'+'.join(map(label, encoded))} = {embeds} "
        f"embeddings, encoder budget {config.encoder_compute_budget}",
    )


# --- SYS-5: within capacity, and one brain -------------------------------------------------


def sys5_within_capacity(
    config: EngineConfig,
    model: EngineModel,
    after: EngineSnapshot,
    freed: Sequence[str],
    label: Label,
    pending_encoded: frozenset[str] = frozenset(),
    pending_freed: frozenset[str] = frozenset(),
) -> None:
    """At most ``C`` embeddings held and the rest free; the worker holds what the cache
    manager holds, none of it reported freed; the KV blocks in use are the unfinished
    requests', within the cache, at least ``⌈c/bs⌉`` each. With a step in flight (async
    scheduling) the worker has not yet stored its encodes (``pending_encoded``) nor
    dropped its frees (``pending_freed``)."""
    refs = after.encoder_cache_refs
    held = model.held_embeds(refs)
    check(
        held <= config.encoder_cache_size
        and after.encoder_cache_free_slots == config.encoder_cache_size - held,
        "SYS-5",
        f"the encoder cache holds {held} embeddings ({', '.join(map(label, refs))}) "
        f"with {after.encoder_cache_free_slots} free slots; capacity "
        f"{config.encoder_cache_size}",
    )
    # a hash the step in flight encodes may still be held from before (evicted and
    # re-allocated in one scheduling pass: never reported freed), or not yet
    expected = (frozenset(refs) - pending_encoded) | pending_freed
    in_flight = ""
    if pending_encoded or pending_freed:
        in_flight = (
            f" (the step in flight will store {sorted(map(label, pending_encoded))} and "
            f"drop {sorted(map(label, pending_freed))})"
        )
    check(
        after.worker_held - pending_encoded == expected,
        "SYS-5",
        f"the worker holds {sorted(map(label, after.worker_held))} but the "
        f"scheduler accounts for {sorted(map(label, refs))}{in_flight}",
    )
    still = [h for h in freed if h in refs and h not in pending_encoded]
    check(
        not still,
        "SYS-5",
        f"the worker was told to drop {', '.join(map(label, still))}, which the "
        "cache manager still holds",
    )
    blocks: set[int] = set()
    for request_id, snap in after.requests.items():
        blocks |= set(snap.kv_block_ids)
        need = ceil_div(snap.num_computed_tokens, config.block_size)
        check(
            len(snap.kv_block_ids) >= need,
            "SYS-5",
            f"{request_id} has computed {snap.num_computed_tokens} tokens in "
            f"{len(snap.kv_block_ids)} KV blocks of {config.block_size}",
        )
    check(
        all(0 <= b < config.num_kv_blocks for b in blocks)
        and len(blocks) == after.num_kv_blocks_in_use <= config.num_kv_blocks,
        "SYS-5",
        f"KV blocks in use {sorted(blocks)} (reported {after.num_kv_blocks_in_use}) "
        f"exceed the {config.num_kv_blocks}-block cache",
    )


# --- SYS-6: every KV position is the request's own ----------------------------------------


def sys6_kv_sources(
    request_id: str,
    snap: RequestSnapshot,
    facts: RequestFacts,
    label: Label,
    asynchronous: bool = False,
) -> None:
    """One source per computed position, each what the request has there: its own
    token, or its own item's row. Only with async scheduling may positions wait for a
    step in flight (SYS-15 bounds how many); otherwise none does."""
    check(
        asynchronous or snap.num_in_flight_tokens == 0,
        "SYS-6",
        f"{request_id}: {snap.num_in_flight_tokens!r} computed positions are said to wait "
        "for a step in flight, but the engine schedules synchronously",
    )
    executed = snap.num_computed_tokens - snap.num_in_flight_tokens
    check(
        len(snap.kv_sources) == executed,
        "SYS-6",
        f"{request_id}: {len(snap.kv_sources)} KV sources for "
        f"{executed} computed positions",
    )
    for position, source in enumerate(snap.kv_sources):
        want = facts.source_at(position, snap.output_token_ids)
        if source != want:
            check(
                False,
                "SYS-6",
                f"{request_id}'s KV at position {position} was computed from "
                f"{fmt_source(source, label)}, but that position is "
                f"{fmt_source(want, label)}",
            )


# --- SYS-7: references follow use ---------------------------------------------------------


def sys7_released(
    request_id: str, after: EngineSnapshot, why: str, label: Label, *, gone: bool
) -> None:
    """After a finish or an abort (``gone``) or a preemption, the request references
    nothing; a preempted one waits with nothing computed and no KV blocks."""
    holders = sorted(label(h) for h, ids in after.encoder_cache_refs.items() if request_id in ids)
    check(
        not holders,
        "SYS-7",
        f"after {why} of {request_id} it still references {', '.join(holders)} in "
        "the encoder cache",
    )
    snapshot = after.requests.get(request_id)
    if gone:
        check(
            snapshot is None,
            "SYS-7",
            f"after {why}, {request_id} is still in the engine",
        )
        return
    check(
        snapshot is not None
        and snapshot.status == "waiting"
        and snapshot.num_computed_tokens == 0
        and not snapshot.kv_block_ids,
        "SYS-7",
        f"after preemption {request_id} must wait with nothing computed and no KV "
        f"blocks (its generated tokens kept), but it is {snapshot}",
    )


def sys7_running_keeps_its_images(
    model: EngineModel,
    after: EngineSnapshot,
    scheduled_to: Callable[[str], int | None] = lambda request_id: None,
    pending_encoded: frozenset[str] = frozenset(),
) -> None:
    """A running request keeps the images it is in the middle of: served rows of, with
    ``is_embed`` positions left to compute (with async scheduling: left to schedule,
    past the end of its chunk in flight, ``scheduled_to``; the worker may be about to
    store it again)."""
    refs = after.encoder_cache_refs
    for request_id, progress in model.progress.items():
        facts = model.facts[request_id]
        frontier = scheduled_to(request_id)
        frontier = progress.computed if frontier is None else frontier
        for index in progress.touched:
            if not any(p >= frontier for p in facts.embed_positions(index)):
                continue
            mm_hash = facts.request.items[index].mm_hash
            check(
                request_id in refs.get(mm_hash, frozenset())
                and (mm_hash in after.worker_held or mm_hash in pending_encoded),
                "SYS-7",
                f"{request_id} has consumed part of image {facts.labels[index]} and "
                "still needs the rest, but no longer references it",
            )


def sys7_waiting_holds_nothing(
    request_id: str,
    snap: RequestSnapshot,
    progress: RequestProgress,
    after: EngineSnapshot,
    in_flight: int = 0,
) -> None:
    """A waiting request (neither executed nor in flight) holds no KV block and no
    encoder-cache reference."""
    if not progress.running and not in_flight:
        check(
            not snap.kv_block_ids
            and not any(request_id in ids for ids in after.encoder_cache_refs.values()),
            "SYS-7",
            f"{request_id} is waiting but holds KV blocks or encoder references",
        )


# --- SYS-8: progress -----------------------------------------------------------------------


def sys8_step_progresses(
    step: int, live_before: Sequence[str], out: StepOutput, asynchronous: bool = False
) -> None:
    """A step with unfinished requests computes a token or preempts a request (with
    async scheduling: or schedules a step that computes one)."""
    if live_before:
        scheduled = asynchronous and bool(out.in_flight)
        check(
            bool(out.chunks) or bool(out.preempted) or scheduled,
            "SYS-8",
            f"step {step}: {sorted(live_before)} are unfinished but the step "
            "computed nothing and preempted nobody (a livelock: the next step is the "
            "same)",
        )


def sys8_solo_finishes(request_id: str, left: int) -> None:
    """A request alone in the engine finishes within its bound (``left``: steps of it
    that remain after this one)."""
    check(
        left > 0,
        "SYS-8",
        f"{request_id}, alone in the engine, did not finish within the bound "
        "⌈(P − c)/T⌉ + k + (max_new_tokens − 1) steps",
    )


def sys8_work_conserved(
    step: int,
    config: EngineConfig,
    model: EngineModel,
    live_before: Sequence[str],
    scheduled_ids: Sequence[str],
    out: StepOutput,
    after: EngineSnapshot,
    tokens: int,
) -> None:
    """In a step that preempts nobody and leaves token budget unused: only
    an image can stop a chunk (the hook cuts at an image, nowhere else), so every
    request that was running with its next position outside every image (a text
    token, or decoding) computes; and every waiting request computes whose first
    chunk starts at text wherever its prefix hit ends (every whole-block position
    below ``P + g``, its prompt and generated tokens), when the free KV blocks cover
    the ``P + g`` tokens of every waiting request left unscheduled (so none stopped
    admission). With a hybrid model (SYS-16), only when at least a block of the budget
    is unused: a chunk cut back to a block boundary may leave less."""
    block = config.block_size
    unused = config.token_budget - tokens
    if config.mamba_block_aligned and unused < block:
        return  # a hybrid model's chunk cut back to a block boundary may leave less
    released = sum(ceil_div(model.facts[r].kv_positions(), block) for r in out.finished)
    free_low = config.num_kv_blocks - after.num_kv_blocks_in_use - released
    states = HYBRID_STATE_BLOCKS if config.mamba_block_aligned else 0  # SYS-16's
    kv_room = all(
        free_low
        >= ceil_div(
            model.facts[r].num_tokens(model.progress[r].outputs) + model.facts[r].lookahead,
            block,
        )
        + states
        for r in live_before
        if r not in scheduled_ids and not model.progress[r].running
    )
    for request_id in live_before:
        progress = model.progress[request_id]
        if request_id in scheduled_ids:
            continue
        facts = model.facts[request_id]
        if progress.running:
            check(
                facts.item_at(progress.computed) is not None,
                "SYS-8",
                f"step {step} leaves {unused} of the token budget unused and "
                f"preempts nobody, but {request_id}, running with position "
                f"{progress.computed} (text) next, computes nothing",
            )
            continue
        # a hit may end at any whole block below P + g (generated tokens too)
        total = facts.num_tokens(progress.outputs)
        starts = range(0, total, block) if config.enable_prefix_caching else [0]
        if not kv_room or any(facts.item_at(p) is not None for p in starts):
            continue  # the KV cache, or an image, may have stopped it
        check(
            False,
            "SYS-8",
            f"step {step} leaves {unused} of the token budget unused, preempts "
            f"nobody and has {free_low} free KV blocks, but waiting {request_id}, "
            f"whose first chunk starts at text wherever a prefix hit ends, is not "
            "admitted",
        )


def sys8_drain_finishes(live: Sequence[str], bound: int) -> None:
    """With no arrivals, every unfinished request finishes within ``bound`` steps."""
    check(
        not live,
        "SYS-8",
        f"with no new requests, {sorted(live)} did not finish within "
        f"{bound} steps (deadlock or livelock)",
    )


# --- SYS-9: what can never run is rejected at admission ------------------------------------


def sys9_admission(request_id: str, problem: str | None, error: AdmissionError | None) -> None:
    """``AdmissionError`` (``error``) exactly for a request that can never run
    (``problem``: why, from the model)."""
    if error is not None:
        check(
            problem is not None,
            "SYS-9",
            f"{request_id} can run under this config but was rejected: {error}",
        )
        return
    check(
        problem is None,
        "SYS-9",
        f"{request_id} can never run ({problem}) but was admitted instead of being "
        "rejected with AdmissionError",
    )


def sys9_malformed_rejected(engine: EngineLoop) -> None:
    """A malformed request raises ``InvalidInputError`` and leaves the
    engine as it was. Fixed requests, drawn from nothing, so that the machine's
    test cases (and the shrunk counterexamples) stay what they were."""
    bad_tokens: tuple[tuple[str, Any], ...] = (
        ("a negative token", (1, -1)),
        ("a bool token", (1, True)),
        ("a float token", (1, 1.5)),
    )
    bad_max_new: tuple[tuple[str, Any], ...] = (
        ("max_new_tokens 0", 0),
        ("max_new_tokens True", True),
        ("max_new_tokens 1.5", 1.5),
    )
    malformed = [(why, EngineRequest("malformed", tokens)) for why, tokens in bad_tokens]
    malformed += [
        (why, EngineRequest("malformed", (1, 2), max_new_tokens=value))
        for why, value in bad_max_new
    ]
    before = engine.snapshot()
    for why, request in malformed:
        expect_error(
            "SYS-9",
            InvalidInputError,
            partial(engine.add_request, request),
            f"add_request of a request with {why}",
        )
        check(
            engine.snapshot() == before,
            "SYS-9",
            f"a rejected request with {why} changed the engine's snapshot",
        )


def sys9_config_limits(build: Callable[[EngineConfig], EngineLoop]) -> None:
    """An ``EngineConfig`` below its limits (token budget, KV blocks, block
    size and hidden size ≥ 1; encoder budget and cache ≥ 0; ints, not bools) raises
    ``InvalidInputError`` when ``build`` makes the engine; one exactly at them is
    accepted. Fixed configs, no draws."""
    lowest = EngineConfig(
        token_budget=1,
        encoder_compute_budget=0,
        encoder_cache_size=0,
        num_kv_blocks=1,
        block_size=1,
        hidden_size=1,
    )
    try:
        build(lowest)
    except InvalidInputError as error:
        check(False, "SYS-9", f"an engine exactly at the config limits was refused: {error}")
    bad: list[tuple[str, Any]] = []
    for name, limit in (
        ("token_budget", 1), ("encoder_compute_budget", 0), ("encoder_cache_size", 0),
        ("num_kv_blocks", 1), ("block_size", 1), ("hidden_size", 1),
    ):
        bad += [(name, limit - 1), (name, True), (name, float(limit + 1))]
    for name, value in bad:
        config = replace(lowest, **{name: value})
        expect_error(
            "SYS-9",
            InvalidInputError,
            partial(build, config),
            f"an engine with {name}={value!r}",
        )


# --- SYS-10: chunks follow the request -----------------------------------------------------


def sys10_step_requests(
    step: int,
    model: EngineModel,
    scheduled_ids: Sequence[str],
    preempted_ids: Sequence[str],
    in_flight: Callable[[str], int] = lambda request_id: 0,
) -> None:
    """At most one chunk per request, only for unfinished requests; only running
    requests are preempted (with async scheduling: executed or in flight), and not in a
    step that computes them."""
    preempted = set(preempted_ids)
    check(
        len(set(scheduled_ids)) == len(scheduled_ids),
        "SYS-10",
        f"step {step}: a request has two chunks: {scheduled_ids}",
    )
    for request_id in [*scheduled_ids, *preempted_ids]:
        check(
            model.is_live(request_id),
            "SYS-10",
            f"step {step}: {request_id} is not an unfinished request",
        )
    check(
        not preempted & set(scheduled_ids),
        "SYS-10",
        f"step {step}: {sorted(preempted & set(scheduled_ids))} both computed "
        "and preempted",
    )
    for request_id in preempted_ids:
        check(
            model.progress[request_id].running or in_flight(request_id) > 0,
            "SYS-10",
            f"step {step}: {request_id} preempted but it was not running",
        )


def sys10_chunk_position(
    step: int,
    config: EngineConfig,
    facts: RequestFacts,
    progress: RequestProgress,
    start: int,
    new: int,
) -> None:
    """A chunk starts where the previous one ended (the first at a prefix hit: whole
    blocks, at most ``P + g − 1``, 0 without prefix caching), is not empty, runs not
    past ``P + g``, and with chunked multimodal input disabled ends inside no image."""
    request_id = facts.request_id
    # P + g: after a preemption the generated tokens are recomputed too
    total = facts.num_tokens(progress.outputs)
    check(new >= 1, "SYS-10", f"step {step}: {request_id} has an empty chunk")
    if progress.running:
        check(
            start == progress.computed,
            "SYS-10",
            f"step {step}: {request_id} had computed {progress.computed} tokens "
            f"but its chunk starts at {start}",
        )
    else:
        block = config.block_size
        hit_ok = (
            start % block == 0
            and start <= total - 1
            and (config.enable_prefix_caching or start == 0)
        )
        check(
            hit_ok,
            "SYS-10",
            f"step {step}: {request_id} starts at {start}: a prefix hit is a "
            f"whole number of {block}-token blocks, at most P + g - 1 = {total - 1} "
            f"({progress.outputs} generated), and 0 without prefix caching",
        )
    # decode chunks are one token: a running request that caught up has
    # computed P + g - 1 positions, so this bound leaves it one
    check(
        start + new <= total,
        "SYS-10",
        f"step {step}: {request_id} computes [{start}, {start + new}) but has "
        f"only {total} tokens ({facts.num_prompt_tokens} of prompt, "
        f"{progress.outputs} generated)",
    )
    if config.disable_chunked_mm_input:
        for index, item in enumerate(facts.request.items):
            offset, end = item.mm_position.offset, item.mm_position.end
            check(
                not (start <= offset < start + new < end),
                "SYS-10",
                f"step {step}: with chunked multimodal input disabled, "
                f"{request_id} computes [{start}, {start + new}), which ends inside "
                f"image {facts.labels[index]} at [{offset}, {end})",
            )


def sys10_no_drafts(step: int, chunk: ScheduledChunk) -> None:
    """Without a drafter a chunk verifies no drafts: decodes are one token."""
    check(
        chunk.num_draft_tokens == 0 and chunk.num_accepted_drafts == 0,
        "SYS-10",
        f"step {step}: {chunk.request_id}'s chunk reports {chunk.num_draft_tokens!r} "
        f"drafts ({chunk.num_accepted_drafts!r} accepted), but the engine runs no drafter",
    )


def sys10_finished_exactly(step: int, finished: Sequence[str], expected: set[str]) -> None:
    """The requests that finish are exactly those that generated their last token."""
    check(
        set(finished) == expected,
        "SYS-10",
        f"step {step}: finished {sorted(finished)}, but the requests that "
        f"generated their last token are {sorted(expected)}",
    )


def sys10_holds_the_unfinished(after: EngineSnapshot, model: EngineModel) -> None:
    """The engine holds exactly the unfinished requests."""
    check(
        set(after.requests) == set(model.progress),
        "SYS-10",
        f"the engine holds {sorted(after.requests)}, unfinished are "
        f"{sorted(model.progress)}",
    )


def sys10_snapshot_agrees(
    request_id: str,
    snap: RequestSnapshot,
    progress: RequestProgress,
    scheduled_to: int | None = None,
) -> None:
    """The snapshot files the request under its own id, its generated tokens are
    token ids, and its status, computed and generated tokens are what its chunks say
    (with async scheduling: computed reaches the end of its chunk in flight,
    ``scheduled_to``, and it runs once scheduled)."""
    check(
        snap.request_id == request_id,
        "SYS-10",
        f"the snapshot files {snap.request_id!r} under {request_id}",
    )
    bad = [t for t in snap.output_token_ids
           if isinstance(t, bool) or not isinstance(t, int) or t < 0]
    check(
        not bad,
        "SYS-10",
        f"{request_id} generated {bad}: generated tokens are token ids",
    )
    running = progress.running or scheduled_to is not None
    computed = progress.computed if scheduled_to is None else scheduled_to
    check(
        snap.num_computed_tokens == computed
        and len(snap.output_token_ids) == progress.outputs
        and (snap.status == "running") == running,
        "SYS-10",
        f"{request_id}: the engine says {snap.status}, {snap.num_computed_tokens} "
        f"computed, {len(snap.output_token_ids)} generated; its chunks say "
        f"{'running' if running else 'waiting'}, {computed}"
        f"{' (with its chunk in flight)' if scheduled_to is not None else ''}, "
        f"{progress.outputs} (a preemption keeps the generated tokens)",
    )


def sys10_unknown_refused(action: Callable[[str], None], request_id: str, what: str) -> None:
    """An id that is not unfinished is refused with ``UnknownRequestError``."""
    expect_error(
        "SYS-10",
        UnknownRequestError,
        lambda: action(request_id),
        f"{what}({request_id}) of a finished or aborted request",
    )

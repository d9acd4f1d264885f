"""What ``EngineAsyncMachine`` adds to the engine machine's checks (SYS-15): the step in
flight, and that the worker executes exactly what the scheduler scheduled before it.

With async scheduling each ``step()`` schedules a step and executes the one scheduled by
the previous call (:class:`Pipeline` is what the machine saw of that step when it was
scheduled). The machine's other checks read the executed step as before; where they
compare the engine's state between calls with the model, the step in flight is part of
it (the frontier counts it, the worker has not yet stored its encodes nor dropped its
frees): :meth:`Pipeline.tokens_of`, :attr:`Pipeline.encoded`, :attr:`Pipeline.freed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from properties.framework import check
from properties.models.engine import RequestFacts, RequestProgress
from spec.components import EngineSnapshot, RequestSnapshot, ScheduledChunk, StepOutput


@dataclass
class Pipeline:
    """The step scheduled and not yet executed (empty without async scheduling)."""

    #: (request id, start, tokens) of each chunk, in scheduling order
    chunks: tuple[tuple[str, int, int], ...] = ()
    #: the drafts each of them verifies (with a drafter: placeholders the worker fills)
    drafts: tuple[int, ...] = ()
    #: the hashes it will encode, and tell the worker to drop
    encoded: frozenset[str] = frozenset()
    freed: frozenset[str] = frozenset()
    #: the requests preempted while it was scheduled
    preempted: tuple[str, ...] = ()
    #: the engine's state it was scheduled from (the snapshot before that call)
    before: EngineSnapshot | None = None
    #: requests preempted or aborted since it was scheduled: their chunks still execute,
    #: their outputs are dropped (or delivered before the request resumes)
    stale: set[str] = field(default_factory=set)

    @classmethod
    def scheduled(cls, out: StepOutput, before: EngineSnapshot) -> Pipeline:
        return cls(
            chunks=tuple(
                (c.request_id, c.num_computed_tokens, c.num_new_tokens) for c in out.in_flight
            ),
            drafts=tuple(c.num_draft_tokens for c in out.in_flight),
            encoded=frozenset(out.in_flight_encoded_mm_hashes),
            freed=frozenset(out.in_flight_freed_mm_hashes),
            preempted=tuple(out.preempted),
            before=before,
            # with a drafter, a chunk scheduled after one that could only finish its
            # request by accepting its drafts, which it did: it executes, is dropped
            stale={c.request_id for c in out.in_flight} & set(out.finished),
        )

    def tokens_of(self, request_id: str) -> int:
        """The tokens the request's chunk in flight computes for it (0: none, or its
        request was preempted or aborted since: the chunk is stale)."""
        if request_id in self.stale:
            return 0
        return sum(new for rid, _, new in self.chunks if rid == request_id)

    def end_of(self, request_id: str) -> int | None:
        """Where the request's chunk in flight ends: its scheduled frontier (None: no
        chunk, or a stale one)."""
        if request_id in self.stale:
            return None
        ends = [start + new for rid, start, new in self.chunks if rid == request_id]
        return ends[0] if ends else None

    def has_chunk(self, request_id: str) -> bool:
        return any(rid == request_id for rid, _, _ in self.chunks)

    def own_end_of(self, request_id: str) -> int | None:
        """Where the request's chunk in flight ends before the drafts it verifies (None:
        no chunk, or a stale one): it samples iff that is the request's ``P + g``."""
        if request_id in self.stale:
            return None
        for (rid, start, new), drafts in zip(self.chunks, self.drafts, strict=True):
            if rid == request_id:
                return start + new - drafts
        return None


def sys15_executes_what_was_scheduled(step: int, pipeline: Pipeline, out: StepOutput) -> None:
    """The step executed is the one scheduled by the previous call: the same chunks,
    encodes and frees, none added, none lost (the in-flight chunk of a request aborted or
    preempted since included)."""
    executed = tuple((c.request_id, c.num_computed_tokens, c.num_new_tokens) for c in out.chunks)
    check(
        executed == pipeline.chunks,
        "SYS-15",
        f"step {step} executed chunks {list(executed)}, but the step the previous call "
        f"scheduled (left in flight) was {list(pipeline.chunks)}",
    )
    drafts = tuple(c.num_draft_tokens for c in out.chunks)
    check(
        drafts == pipeline.drafts,
        "SYS-15",
        f"step {step}'s chunks verified {list(drafts)} drafts; left in flight they were to "
        f"verify {list(pipeline.drafts)}",
    )
    check(
        frozenset(out.encoded_mm_hashes) == pipeline.encoded
        and frozenset(out.freed_mm_hashes) == pipeline.freed,
        "SYS-15",
        f"step {step} encoded {sorted(out.encoded_mm_hashes)} and dropped "
        f"{sorted(out.freed_mm_hashes)}; the step in flight was to encode "
        f"{sorted(pipeline.encoded)} and drop {sorted(pipeline.freed)}",
    )


def sys15_in_flight_scheduled_once(step: int, out: StepOutput, live: Sequence[str]) -> None:
    """The step left in flight has at most one chunk per request, only for unfinished
    requests, none of them preempted while it was scheduled — or, with a drafter, for a
    request the step just executed finished by accepting drafts: scheduled before the
    acceptance was known, that chunk executes and is dropped."""
    ids = [c.request_id for c in out.in_flight]
    by_drafts = {c.request_id for c in out.chunks if c.num_accepted_drafts} & set(out.finished)
    check(
        len(set(ids)) == len(ids)
        and set(ids) <= set(live) | by_drafts
        and not set(ids) & set(out.preempted),
        "SYS-15",
        f"step {step} left in flight chunks for {ids} (preempted while scheduling: "
        f"{sorted(out.preempted)}; unfinished: {sorted(live)}"
        + (f"; finished by accepted drafts: {sorted(by_drafts)})" if by_drafts else ")"),
    )


def sys15_snapshot_in_flight(
    request_id: str, snap: RequestSnapshot, in_flight: int, scheduled_to: int | None
) -> None:
    """The snapshot counts the chunk in flight in ``num_computed_tokens`` and says how
    many of its last positions still wait for their KV (``num_in_flight_tokens``): at
    least the chunk's, at most every position up to its end (a prefix hit on blocks
    another request's chunk in flight computes waits too)."""
    most = 0 if scheduled_to is None else scheduled_to
    check(
        isinstance(snap.num_in_flight_tokens, int)
        and in_flight <= snap.num_in_flight_tokens <= most,
        "SYS-15",
        f"{request_id} has {in_flight} tokens in flight, its chunk ending at {most}; the "
        f"engine says {snap.num_in_flight_tokens!r} of its positions wait for their KV",
    )


def sys15_stale_output(
    step: int,
    facts: RequestFacts,
    progress: RequestProgress,
    chunk: ScheduledChunk,
    generated_now: int,
    resumed: bool,
) -> int:
    """A chunk in flight when its request was preempted executes; its sample (with
    accepted drafts, its ``1 + a``), if it has one, may be delivered to the request —
    before the request resumes, never after — or dropped; nothing else changes.
    Returns the tokens delivered."""
    end = chunk.num_computed_tokens + chunk.num_new_tokens
    samples = end - chunk.num_draft_tokens == facts.num_tokens(progress.outputs)
    left = facts.request.max_new_tokens - progress.outputs
    sampled = min(1 + chunk.num_accepted_drafts, left)  # with drafts: 1 + a
    allowed = sampled if samples and not resumed and left > 0 else 0
    delivered = generated_now - progress.outputs
    check(
        0 <= delivered <= allowed,
        "SYS-15",
        f"step {step}: {facts.request_id}'s chunk [{chunk.num_computed_tokens}, {end}) "
        f"was in flight when it was preempted; it may deliver {allowed} token(s) "
        f"{'(its request resumed already: none) ' if resumed and samples else ''}"
        f"but {facts.request_id} went from {progress.outputs} to {generated_now} generated",
    )
    return delivered

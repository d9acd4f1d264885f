"""The worker side of the vLLM engine loop: answers one ``SchedulerOutput`` as vLLM's
model runner does with encoder work (``GPUModelRunner``), and returns the
``ModelRunnerOutput`` that vLLM's ``Scheduler.update_from_output`` reads.

With model runner V2's encoder cache as the store (:mod:`adapters.vllm.runner_v2`, the
scheduler built for V2), the requests' features live in V2's ``EncoderCache``: before
encoding, the store installs the step as V2's ``execute_model`` does (finished and
preempted requests removed, the freed hashes freed, new and reinstalled requests'
features added, the scheduler's ``encoder_input_updates`` applied), and what gets
encoded is V2's ``prepare_mm_inputs`` over them; the drafter's look-ahead is V2's
``gather_mm_embeddings(draft_lookahead=1)`` over the installed request. With async
scheduling, V2 keeps the corrected computed count on the device
(``RequestState.num_computed_tokens``, less the rejected drafts, as V1's deferred
corrections give) and gathers with its CPU mirror, the scheduler's optimistic count: the
two differ only after rejected drafts, in a decode, whose window holds no image — so the
stand-in's corrected start (below) serves the same rows; every step checks it
(:func:`_check_v2_gather_window`).

This is the stand-in for the model runner (no GPU, no weights). Per step, in the
runner's order: ``free_encoder_mm_hashes`` are dropped before the new encoder outputs
are stored (``_process_encoder_cache_scheduler_output``, then ``_execute_mm_encoder``),
every ``scheduled_encoder_inputs`` entry is encoded with the project's toy encoder (the
runner encodes each scheduled input: a hash scheduled twice is encoded twice), and each
chunk's rows are gathered (``_gather_mm_embeddings``) through the worker store (WRK,
judged by SYS-1/2): in the vLLM adapter, vLLM's own runner methods
(:mod:`adapters.vllm.runner`), which also do the free and the store. Every computed
position's KV source is written into its KV block (SYS-6), through block tables kept
from the ``SchedulerOutput``s alone, as the runner keeps them (``_update_states``): the
snapshot reads the scheduler's block tables (``KVCacheManager.get_block_ids``), so an
output that tells the worker the wrong blocks shows as KV computed from the wrong
source. A request whose chunk reaches its
``num_tokens`` samples a token (a partial prefill's sample is discarded, as the runner
does); no logprobs.

With a drafter (SYS-14) the chunk's ``scheduled_spec_decode_tokens`` are its last
positions: the target accepts the longest prefix of them equal to what it samples there
(the rejection sampler of a greedy target, :func:`reference.engine.accepted_drafts`) and
returns ``1 + a`` sampled tokens, from which vLLM's ``update_from_output`` computes the
rejections; a draft of ``-1`` (0.33.0's padding of a new decode) is never accepted.
After the update the drafter proposes the next drafts (:meth:`EngineWorker.propose`,
the engine core's ``post_step`` hands them to ``Scheduler.update_draft_token_ids``).

With async scheduling too (SYS-15), the scheduler schedules ``-1`` placeholder drafts
and a start that assumes the step before accepted all of its drafts; as vLLM's runner
does (``prev_num_draft_len``, ``deferred_spec_decode_corrections`` in
``GPUModelRunner._update_states``), the stand-in keeps its drafter's proposals after
each sample and the rejections of the step it executed last: it fills the placeholders
with the proposals (``-1`` past them, never accepted) and executes a request that was
in that step, not resumed, that many positions earlier (:meth:`EngineWorker.start_of`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numpy.typing import NDArray

from reference.engine import accepted_drafts, chunk_gathers, proposed_drafts
from spec.components import Encoder, KVSource, ScheduledChunk, WorkerStore
from spec.types import EngineRequest, GatherSpec, WorkerStep
from spec.weights import rows_at_weights_version

from .runner import VllmWorkerStore, runner_encodes
from .runner_v2 import VllmV2WorkerStore
from .versions import VllmCode


@dataclass(frozen=True)
class WorkerAnswer:
    chunks: tuple[ScheduledChunk, ...]
    encoded_mm_hashes: tuple[str, ...]
    model_runner_output: Any


def chunk_starts(scheduler_output: Any) -> dict[str, int]:
    """Each scheduled request's ``num_computed_tokens`` before this step, as the
    ``SchedulerOutput`` tells the runner (new requests, then cached ones)."""
    starts = {
        new.req_id: int(new.num_computed_tokens) for new in scheduler_output.scheduled_new_reqs
    }
    cached = scheduler_output.scheduled_cached_reqs
    for req_id, computed in zip(cached.req_ids, cached.num_computed_tokens, strict=True):
        starts[req_id] = int(computed)
    return starts


def sampled_token(num_outputs: int) -> int:
    """The token the simulated model generates as its ``num_outputs``-th output (as the
    reference loop's: easy to read in a trace)."""
    return num_outputs


class EngineWorker:
    """The runner stand-in: an encoder, a worker store and the KV blocks' contents."""

    def __init__(
        self,
        encoder: Encoder,
        store: WorkerStore,
        num_blocks: int,
        block_size: int,
        drafter: bool = False,
        async_drafts: int = 0,
        code: VllmCode | None = None,
    ):
        #: the release whose runner decides which scheduled inputs it encodes (None:
        #: every one)
        self.code = code
        #: request id -> the ``mm_features`` the runner was given when the request was
        #: installed (``NewRequestData``; kept while it is preempted, as the runner's
        #: ``CachedRequestState`` is)
        self.features: dict[str, list[Any]] = {}
        self.encoder = encoder
        self.store = store
        self.block_size = block_size
        #: an EAGLE drafter: after the target, every chunk's window shifted by one
        self.drafter = drafter
        #: with async scheduling, the drafter's k (0: the scheduler knows the drafts)
        self.async_drafts = async_drafts
        #: async drafts: the proposals after each request's last sample, and the
        #: drafts each request of the step executed last rejected
        self.drafted: dict[str, list[int]] = {}
        self.rejected: dict[str, int] = {}
        #: per vLLM block id, per slot: what the position's KV was computed from
        self.kv_sources: list[list[KVSource | None]] = [
            [None] * block_size for _ in range(num_blocks)
        ]
        #: per vLLM block id, per slot: the weights version it was computed at (SYS-12)
        self.kv_versions: list[list[int]] = [[0] * block_size for _ in range(num_blocks)]
        #: the model's weights (the engine loop's ``update_weights`` moves it on)
        self.weights_version = 0
        #: request id -> its block table, kept from the SchedulerOutputs alone
        self.block_tables: dict[str, list[int]] = {}

    def _update_block_tables(self, scheduler_output: Any) -> None:
        """``GPUModelRunner._update_states``: finished and preempted requests leave the
        block tables (a finished one its ``mm_features`` too), a new request brings its
        blocks and ``mm_features``, a resumed one replaces its blocks, a running one
        appends."""
        for req_id in (*scheduler_output.finished_req_ids,
                       *(scheduler_output.preempted_req_ids or ())):
            self.block_tables.pop(req_id, None)
        for req_id in scheduler_output.finished_req_ids:
            self.features.pop(req_id, None)
        for new in scheduler_output.scheduled_new_reqs:
            self.block_tables[new.req_id] = [int(b) for b in new.block_ids[0]]
            self.features[new.req_id] = list(new.mm_features)
        cached = scheduler_output.scheduled_cached_reqs
        for req_id, new_ids in zip(cached.req_ids, cached.new_block_ids, strict=True):
            added = [] if new_ids is None else [int(b) for b in new_ids[0]]
            if req_id in cached.resumed_req_ids:
                self.block_tables[req_id] = added
            else:
                self.block_tables[req_id].extend(added)

    def start_of(self, scheduler_output: Any) -> dict[str, int]:
        """Where each chunk of ``scheduler_output`` executes: where the scheduler put it,
        less, with async drafts, the drafts its request rejected in the step executed
        last (not for a request new or resumed in this one: it starts over)."""
        starts = chunk_starts(scheduler_output)
        if self.async_drafts:
            cached = scheduler_output.scheduled_cached_reqs
            resumed = set(cached.resumed_req_ids)
            for req_id in cached.req_ids:
                if req_id not in resumed:
                    starts[req_id] -= self.rejected.get(req_id, 0)
        return starts

    def execute(
        self,
        scheduler_output: Any,
        requests: Mapping[str, tuple[EngineRequest, Any]],
        model_runner_output_cls: Any,
    ) -> WorkerAnswer:
        self._update_block_tables(scheduler_output)
        starts = self.start_of(scheduler_output)
        rejected: dict[str, int] = {}
        order = list(scheduler_output.num_scheduled_tokens)
        freed = tuple(scheduler_output.free_encoder_mm_hashes)
        v2 = isinstance(self.store, VllmV2WorkerStore)
        if v2:
            _check_v2_gather_window(scheduler_output, starts, requests)
            # V2 installs, frees and updates its requests' features before it encodes:
            # what it encodes is its prepare_mm_inputs over them, after the free — which
            # skips a hash it still holds though the scheduler had evicted it (and
            # scheduled its encode again): the chunk reports what the runner encoded
            self.store.install(scheduler_output)
            encodes: set[tuple[str, int]] | None = self.store.runner_encodes(
                scheduler_output.scheduled_encoder_inputs
            )
            freed = ()  # freed by install, in V2's order
        elif self.code is not None:
            encodes = runner_encodes(self.code, scheduler_output, self.features)
        else:
            encodes = None
        encoded, outputs = self._encode(scheduler_output, requests, encodes)
        gathers: list[GatherSpec] = []
        per_chunk: list[int] = []
        for req_id in order:
            new = int(scheduler_output.num_scheduled_tokens[req_id])
            specs = chunk_gathers(requests[req_id][0], starts[req_id], new)
            gathers += specs
            per_chunk.append(len(specs))
        rows = self.store.execute_step(
            WorkerStep(
                freed_mm_hashes=freed,
                encoder_outputs=outputs,
                gathers=tuple(gathers),
            )
        )
        draft_rows = self._draft_gathers(order, starts, scheduler_output, requests)
        chunks: list[ScheduledChunk] = []
        sampled: list[list[int]] = []
        cursor = 0
        spec_tokens = scheduler_output.scheduled_spec_decode_tokens
        for req_id, count in zip(order, per_chunk, strict=True):
            request, vllm_request = requests[req_id]
            start = starts[req_id]
            new = int(scheduler_output.num_scheduled_tokens[req_id])
            drafts = [int(t) for t in spec_tokens.get(req_id, ())]
            if self.async_drafts:  # the placeholders, filled with the drafter's proposals
                proposed = self.drafted.get(req_id, [])
                drafts = [proposed[i] if i < len(proposed) else -1 for i in range(len(drafts))]
            outputs_so_far = len(vllm_request.output_token_ids)
            own_end = start + new - len(drafts)
            done = own_end >= len(request.token_ids) + outputs_so_far
            accepted = accepted_drafts(outputs_so_far, drafts) if done else 0
            rejected[req_id] = len(drafts) - accepted
            self._write_kv(
                request,
                [*vllm_request.output_token_ids, *drafts],
                self.block_tables[req_id],
                start,
                new,
            )
            chunks.append(
                ScheduledChunk(
                    request_id=req_id,
                    num_computed_tokens=start,
                    num_new_tokens=new,
                    encoder_inputs=tuple(
                        int(i) for i in scheduler_output.scheduled_encoder_inputs.get(req_id, ())
                        if not v2 or (req_id, int(i)) in (encodes or ())
                    ),
                    gathered=tuple(rows[cursor : cursor + count]),
                    draft_gathered=draft_rows.get(req_id, ()),
                    num_draft_tokens=len(drafts),
                    num_accepted_drafts=accepted,
                )
            )
            cursor += count
            sampled.append(
                [sampled_token(outputs_so_far + j) for j in range(1 + accepted)] if done else []
            )
            if self.async_drafts and done:  # the drafter runs after the sample
                self.drafted[req_id] = proposed_drafts(
                    request, outputs_so_far + 1 + accepted, self.async_drafts
                )
        self.rejected = rejected
        runner_output = model_runner_output_cls(
            req_ids=order,
            req_id_to_index={req_id: index for index, req_id in enumerate(order)},
            sampled_token_ids=sampled,
        )
        return WorkerAnswer(tuple(chunks), encoded, runner_output)

    def _draft_gathers(
        self,
        order: Sequence[str],
        starts: Mapping[str, int],
        scheduler_output: Any,
        requests: Mapping[str, tuple[EngineRequest, Any]],
    ) -> dict[str, tuple[NDArray[Any], ...]]:
        """The drafter's ``_gather_mm_embeddings(shift_computed_tokens=1)``, after the
        target's, in the same store: per chunk ``[c, c + n)`` the window
        ``[c + 1, c + n + 1)``. With vLLM's runner as the store, vLLM's own method
        decides; with another store, an item starting at ``c + n`` is gathered only if
        the store holds it (0.33.0's runner falls back to token embeddings past the
        chunk; 0.22.1's asserts — finding V22)."""
        if not self.drafter:
            return {}
        if isinstance(self.store, VllmV2WorkerStore):  # V2's, over the installed request
            return {
                req_id: self.store.draft_gather(
                    req_id,
                    starts[req_id],
                    int(scheduler_output.num_scheduled_tokens[req_id]),
                    len(requests[req_id][0].token_ids),
                )
                for req_id in order
            }
        if isinstance(self.store, VllmWorkerStore):  # vLLM's own shifted gather
            return {
                req_id: self.store.draft_gather(
                    req_id,
                    starts[req_id],
                    int(scheduler_output.num_scheduled_tokens[req_id]),
                    requests[req_id][0].items,
                )
                for req_id in order
            }
        held = self.store.held_hashes()
        specs: dict[str, list[GatherSpec]] = {}
        for req_id in order:
            start = starts[req_id]
            new = int(scheduler_output.num_scheduled_tokens[req_id])
            window = chunk_gathers(requests[req_id][0], start + 1, new)
            specs[req_id] = [
                g for g in window if g.mm_position.offset < start + new or g.mm_hash in held
            ]
        rows = self.store.execute_step(
            WorkerStep(freed_mm_hashes=(), encoder_outputs={},
                       gathers=tuple(g for req_id in order for g in specs[req_id]))
        )
        drafts: dict[str, tuple[NDArray[Any], ...]] = {}
        cursor = 0
        for req_id in order:
            drafts[req_id] = tuple(rows[cursor : cursor + len(specs[req_id])])
            cursor += len(specs[req_id])
        return drafts

    def _encode(
        self,
        scheduler_output: Any,
        requests: Mapping[str, tuple[EngineRequest, Any]],
        encodes: set[tuple[str, int]] | None,
    ) -> tuple[tuple[str, ...], dict[str, NDArray[Any]]]:
        """The toy encoder's outputs for the scheduled inputs the runner encodes
        (``encodes``; None: every one)."""
        hashes: list[str] = []
        batch: list[tuple[Any, int]] = []
        for req_id, input_ids in scheduler_output.scheduled_encoder_inputs.items():
            request = requests[req_id][0]
            for input_id in input_ids:
                if encodes is not None and (req_id, int(input_id)) not in encodes:
                    continue  # its data never reached the runner, which skips it
                item = request.items[input_id]
                hashes.append(item.mm_hash)
                batch.append((request.data[input_id], item.num_embeds))
        outputs = self.encoder.encode_batch(batch) if batch else []
        version = self.weights_version
        return tuple(hashes), {
            mm_hash: rows_at_weights_version(rows, version)
            for mm_hash, rows in zip(hashes, outputs, strict=True)
        }

    def propose(
        self,
        num_speculative_tokens: int,
        order: Sequence[str],
        requests: Mapping[str, tuple[EngineRequest, Any]],
    ) -> tuple[list[str], list[list[int]]]:
        """The drafter's proposals after a step, for every request the step ran (vLLM's
        drafter runs on the whole batch; ``update_draft_token_ids`` drops those of a
        partial prefill): up to ``k`` guesses at the next outputs
        (:func:`reference.engine.proposed_drafts`), and none the request can no longer
        generate — the stand-in's choice, as the reference's, so that drafts and
        look-ahead slots stay within the positions admission counts."""
        req_ids: list[str] = []
        drafts: list[list[int]] = []
        for req_id in order:
            entry = requests.get(req_id)
            if entry is None:
                continue  # finished: vLLM skips it too
            request, vllm_request = entry
            req_ids.append(req_id)
            drafts.append(
                proposed_drafts(
                    request, len(vllm_request.output_token_ids), num_speculative_tokens
                )
            )
        return req_ids, drafts

    def _write_kv(
        self,
        request: EngineRequest,
        tokens_after_prompt: Sequence[int],
        blocks: Sequence[int],
        start: int,
        new: int,
    ) -> None:
        """Each position's source: the splice over the prompt, then the generated tokens
        and the chunk's drafts."""
        for position in range(start, start + new):
            block = blocks[position // self.block_size]
            self.kv_sources[block][position % self.block_size] = kv_source(
                request, tokens_after_prompt, position
            )
            self.kv_versions[block][position % self.block_size] = self.weights_version


def _check_v2_gather_window(
    scheduler_output: Any,
    starts: Mapping[str, int],
    requests: Mapping[str, tuple[EngineRequest, Any]],
) -> None:
    """Model runner V2 gathers a chunk's embeddings from its CPU mirror of the computed
    count — the scheduler's, before the rejected drafts of the step in flight are taken
    off — while the stand-in gathers from the corrected start. The two serve the same
    rows only because they differ just in a decode, past the prompt, where no image is;
    a chunk for which that fails stops the run (an error, never a verdict drawn from a
    window V2 would not read)."""
    for req_id, scheduled_start in chunk_starts(scheduler_output).items():
        start = starts[req_id]
        prompt = len(requests[req_id][0].token_ids)
        if start != scheduled_start and min(start, scheduled_start) < prompt:
            raise AssertionError(
                f"{req_id}: the chunk executes from {start} but V2 would gather from "
                f"{scheduled_start}, inside the prompt of {prompt} tokens"
            )


def kv_source(request: EngineRequest, outputs: Sequence[int], position: int) -> KVSource:
    """The token or embedding row the model reads at ``position`` (the splice)."""
    for item in request.items:
        placeholder = item.mm_position
        if placeholder.offset <= position < placeholder.end:
            relative = position - placeholder.offset
            if placeholder.is_embed is None or placeholder.is_embed[relative]:
                row, _ = placeholder.get_embeds_indices_in_range(relative, relative)
                return ("embed", item.mm_hash, row)
            break
    prompt = len(request.token_ids)
    if position < prompt:
        return ("token", int(request.token_ids[position]))
    if position - prompt < len(outputs):
        return ("token", int(outputs[position - prompt]))
    # past every token the request has (a scheduler that dropped one of its samples):
    # the runner reads whatever its input buffer holds there; SYS-6 reports the -1
    return ("token", -1)



"""The engine loop (SYS-1..10): a step simulator composing the multimodal machinery.

One :class:`EngineLoop` holds many requests and, each :meth:`EngineLoop.step`, does in
miniature what vLLM v1's ``Scheduler.schedule()``, the model runner and
``Scheduler.update_from_output()`` do (``vllm/v1/core/sched/scheduler.py``,
``vllm/v1/worker/gpu_model_runner.py``):

1. **Schedule the running requests**, in order, while the token budget lasts. Each gets
   ``min(num_tokens - num_computed_tokens, token_budget)`` new tokens (image
   placeholder positions are ordinary tokens: they cost budget and KV slots), cut by
   the encoder-scheduling hook (``Scheduler._try_schedule_encoder_inputs``: cached items are free,
   affordable ones are encoded whole, otherwise the chunk stops at the doorstep). A
   request whose chunk is cut to zero is skipped. If its new KV blocks do not fit, the
   *last* running request is preempted (``Scheduler._preempt_request``: KV blocks and encoder
   references released, ``num_computed_tokens = 0``, back to the front of the waiting
   queue; its generated tokens are kept and recomputed with the prompt when it
   resumes), until they fit or the request preempted itself.
2. **Admit waiting requests** (only in a step that preempted nobody, as vLLM does). A
   request's longest cached prefix of full KV blocks counts as computed: the block
   hashes come from the ``BlockHasher`` over the prompt and the tokens generated so far
   (PFX: they mix in the ``mm_hash`` of every image a block touches), and the hit is
   capped at ``num_tokens - 1`` so at least one token is computed; the cap can leave
   the request inside an image. A request the hook cuts
   to zero releases its encoder references and is skipped (vLLM v0.33 skips rather than
   blocking the queue); one whose KV blocks do not fit releases them and stops
   admission.
3. For each scheduled request, **allocate** the items to encode in the encoder cache
   manager, then take references for the in-step duplicates
   (``Scheduler._allocate_encoder_inputs``). After all requests are scheduled, **drain**
   ``get_freed_mm_hashes`` (``free_encoder_mm_hashes``).
4. **Encode** the scheduled items (one encode per hash per step) and **execute** the
   worker step: drop the freed hashes, store the encodes, gather each chunk's rows
   (``WorkerStore.execute_step``). Every computed position's KV source is written into
   its KV block.
5. **Update**: advance ``num_computed_tokens`` (less the rejected drafts); a request
   that caught up with its ``num_tokens`` samples a token (the first when its prefill
   completes, the next when a resumed request has recomputed its prompt and generated
   tokens; then one per decode step, and one more per accepted draft; decode tokens
   are text); cache the newly full KV blocks (prompt and generated tokens alike) under
   their block hashes; release the encoder inputs whose ranges are fully computed
   (``Scheduler._free_encoder_inputs``);
   finish a request with ``max_new_tokens`` outputs and release its KV blocks and
   encoder references.

Between steps (SYS-11, SYS-12): :meth:`EngineLoop.reset_encoder_cache` resets the cache
manager and empties the worker store (``EngineCore.reset_encoder_cache``);
:meth:`EngineLoop.reset_prefix_cache` drops every block hash, only when no block is in
use (``BlockPool.reset_prefix_cache``); :meth:`EngineLoop.update_weights` does what
``EngineCore.pause_scheduler`` with ``mode="keep", clear_cache=True`` does before the
weights change (``EngineCore._reset_caches``: every running request preempted, last first, then
both resets) and moves to the next weights version, at which encodes are
:func:`spec.weights.rows_at_weights_version` of the encoder's rows and KV is recorded
with the version it was computed at.

Admission (SYS-9) rejects with ``AdmissionError`` a request that could never run: an
item with more embeddings than the per-step encoder budget or the encoder cache, an
item longer than the token budget when chunked multimodal input is disabled, or a
prompt whose KV (``len(prompt) + max_new_tokens - 1`` positions) exceeds the KV cache.

With a drafter (SYS-13, SYS-14; ``EngineConfig.num_speculative_tokens = k``): the hook
looks one position ahead, running requests reserve ``k`` look-ahead KV slots, the
drafter gathers every chunk's window shifted by one after the target, and after each
sample it proposes up to ``k`` drafts (``Scheduler.update_draft_token_ids``), which the
request's next chunk verifies as its last positions; the rejected ones roll back in the
update (``num_computed_tokens -= num_rejected``).

With async scheduling (SYS-15; ``EngineConfig.async_scheduling``): each ``step()``
schedules a step and executes the one scheduled by the previous call
(``EngineCore.step_with_batch_queue`` with two batches); scheduling advances
``num_computed_tokens`` and adds the output placeholders
(``AsyncScheduler._update_after_schedule``), the update takes them back, and a chunk of
a request preempted or aborted since it was scheduled still executes, its output
dropped. With a drafter too, a sampling chunk adds ``1 + d`` placeholders and leaves
placeholder drafts for the request's next chunk, which the worker fills with its
drafter's proposals; the update rolls back the rejected ones, and the request's chunk
in flight, scheduled as if they were accepted, executes that many positions earlier.

Simplifications against vLLM: one KV cache group; the drafts are cut to the outputs a
request can still generate (with async scheduling, counting the step in flight's
drafts as accepted, and a request whose step in flight would then finish it is not
scheduled until its output is in), so that admission's ``P + max_new_tokens − 1 + k``
positions always suffice; docs/engine.md's fidelity table lists every symbol named
here and where the loop differs.

Over 400 lines (920) because one engine step as SPEC.md's engine section orders it, read
top to bottom; split, the step's order would no longer be visible in one place.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from numpy.typing import NDArray

from reference.hybrid import aligned_chunk
from reference.kv_blocks import KVBlockPool
from spec.adapter import EngineParts
from spec.components import (
    EngineSnapshot,
    KVSource,
    RequestSnapshot,
    ScheduledChunk,
    StepOutput,
)
from spec.errors import AdmissionError, InvalidInputError, UnknownRequestError
from spec.types import (
    HYBRID_STATE_BLOCKS,
    EngineConfig,
    EngineRequest,
    GatherSpec,
    MultiModalItem,
    RequestView,
    ScheduleDecision,
    SchedulerConfig,
    WorkerStep,
)
from spec.weights import rows_at_weights_version


def validate_request(request: EngineRequest, unfinished: Container[str]) -> RequestView:
    """The request's view; ``InvalidInputError`` for a malformed request or an id
    already among ``unfinished`` (SYS-9)."""
    if not isinstance(request, EngineRequest):
        raise InvalidInputError(f"expected an EngineRequest, got {type(request).__name__}")
    view = request.view()  # validates the id and that items are sorted and disjoint
    if request.request_id in unfinished:
        raise InvalidInputError(f"request {request.request_id!r} is already in the engine")
    if not request.token_ids:
        raise InvalidInputError(f"request {request.request_id}: empty prompt")
    for token in request.token_ids:
        if isinstance(token, bool) or not isinstance(token, int) or token < 0:
            raise InvalidInputError(f"request {request.request_id}: bad token {token!r}")
    if len(request.data) != len(request.items):
        raise InvalidInputError(
            f"request {request.request_id}: {len(request.items)} items but "
            f"{len(request.data)} images"
        )
    for item in request.items:
        if not isinstance(item, MultiModalItem):
            raise InvalidInputError(
                f"request {request.request_id}: items must be MultiModalItems"
            )
        if item.mm_position.end > len(request.token_ids):
            raise InvalidInputError(
                f"request {request.request_id}: item {item.mm_hash} ends at "
                f"{item.mm_position.end}, past the {len(request.token_ids)}-token prompt"
            )
    max_new = request.max_new_tokens
    if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 1:
        raise InvalidInputError(f"request {request.request_id}: max_new_tokens must be >= 1")
    return view


def chunk_gathers(request: EngineRequest, start: int, new: int) -> list[GatherSpec]:
    """``GPUModelRunner._gather_mm_embeddings``: per item overlapping the chunk
    ``[start, start + new)``, the placeholder window it covers, when that window holds at
    least one embedding row."""
    end = start + new
    specs: list[GatherSpec] = []
    for item in request.items:
        position = item.mm_position
        if position.offset >= end or position.end <= start:
            continue
        start_idx = max(start, position.offset) - position.offset
        end_idx = min(end, position.end) - position.offset
        first_row, end_row = position.get_embeds_indices_in_range(start_idx, end_idx)
        if end_row > first_row:
            specs.append(GatherSpec(request.request_id, item.mm_hash, position, start_idx, end_idx))
    return specs


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def check_config(config: EngineConfig) -> None:
    """``InvalidInputError`` for a config below its limits, or not ints (SYS-9)."""
    if not isinstance(config, EngineConfig):
        raise InvalidInputError(f"config must be an EngineConfig, got {type(config).__name__}")
    minimums = {
        "token_budget": 1,
        "encoder_compute_budget": 0,
        "encoder_cache_size": 0,
        "num_kv_blocks": 1,
        "block_size": 1,
        "hidden_size": 1,
        "num_speculative_tokens": 0,
    }
    for name, minimum in minimums.items():
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InvalidInputError(
                f"EngineConfig.{name} must be an int >= {minimum}, got {value!r}"
            )


def sampled_token_id(num_outputs: int) -> int:
    """The token the simulated model generates as its ``num_outputs``-th output (0-based).
    Any deterministic text token would do; this one makes outputs easy to read."""
    return num_outputs


def draft_token_id(num_prompt_tokens: int, output_index: int) -> int:
    """The simulated drafter's guess at a request's ``output_index``-th output: right
    (``sampled_token_id``) except where ``num_prompt_tokens + output_index`` is a
    multiple of 3, so that requests see drafts accepted, rejected and accepted in part
    (SYS-14). Any guess would do: the target verifies it."""
    right = sampled_token_id(output_index)
    return right + 1 if (num_prompt_tokens + output_index) % 3 == 0 else right


def num_drafts_after(request: EngineRequest, num_outputs: int, k: int) -> int:
    """How many drafts a drafter of ``k`` proposes after the request's
    ``num_outputs``-th output: up to ``k``, and only drafts of outputs the request can
    still generate, so that its drafts and look-ahead slots stay within the KV positions
    admission counted (``P + max_new_tokens − 1 + k``)."""
    return max(0, min(k, request.max_new_tokens - num_outputs - 1))


def proposed_drafts(request: EngineRequest, num_outputs: int, k: int) -> list[int]:
    """The simulated drafter's proposals after ``num_outputs`` outputs
    (:func:`draft_token_id` for each of :func:`num_drafts_after`'s)."""
    return [
        draft_token_id(len(request.token_ids), num_outputs + index)
        for index in range(num_drafts_after(request, num_outputs, k))
    ]


def accepted_drafts(num_outputs: int, drafts: Sequence[int]) -> int:
    """How many of ``drafts`` the target accepts after ``num_outputs`` outputs: the
    longest prefix equal to what it samples at those positions (the rejection sampler
    of a greedy target)."""
    accepted = 0
    for index, draft in enumerate(drafts):
        if draft != sampled_token_id(num_outputs + index):
            break
        accepted += 1
    return accepted


@dataclass
class _Request:
    """Engine-side state of one unfinished request."""

    request: EngineRequest
    view: RequestView
    block_hashes: list[str]
    status: Literal["waiting", "running"] = "waiting"
    num_computed_tokens: int = 0
    output_token_ids: list[int] = field(default_factory=list)
    #: the drafts to schedule after the last sample (SYS-14): the drafter's proposals,
    #: or with async scheduling placeholders (-1) the worker fills from ``drafted``
    spec_token_ids: list[int] = field(default_factory=list)
    #: async scheduling with a drafter: the worker's drafter's proposals after the
    #: request's latest sample, which the next chunk's placeholder drafts verify
    drafted: list[int] = field(default_factory=list)
    block_ids: list[int] = field(default_factory=list)
    #: blocks already registered in the prefix cache (or served from it)
    num_cached_blocks: int = 0
    #: async scheduling (SYS-15): tokens the scheduled, unexecuted steps will sample
    #: (``num_output_placeholders``), and positions they will compute
    num_output_placeholders: int = 0
    num_in_flight_tokens: int = 0

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.request.token_ids)

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + len(self.output_token_ids)

    def token_at(self, position: int, drafts: Sequence[int] = ()) -> int:
        """The token at ``position``: the prompt's, a generated one, then ``drafts``."""
        if position < self.num_prompt_tokens:
            return self.request.token_ids[position]
        generated = position - self.num_prompt_tokens
        if generated < len(self.output_token_ids):
            return self.output_token_ids[generated]
        return drafts[generated - len(self.output_token_ids)]


@dataclass
class _Scheduled:
    """A request scheduled this step, with the hook's decision."""

    state: _Request
    num_computed_tokens: int
    num_new_tokens: int
    decision: ScheduleDecision
    #: the drafts this chunk verifies, its last positions (SYS-14)
    drafts: tuple[int, ...] = ()
    #: how many of them the target accepted (set when the step executes)
    accepted: int = 0
    #: whether the chunk reaches the request's last token, so that it samples
    samples: bool = False
    #: the request was preempted or aborted after this chunk was scheduled (async
    #: scheduling): the chunk still executes, its output is dropped
    stale: bool = False


@dataclass
class _Batch:
    """One scheduled step: its chunks, the hashes the worker must drop, the requests
    preempted while scheduling it."""

    scheduled: list[_Scheduled]
    freed: tuple[str, ...]
    preempted: tuple[str, ...]


@dataclass
class _StepBudget:
    """What is left of one step's token and encoder budgets."""

    tokens: int
    encoder: int


class EngineLoop:
    """``spec.components.EngineLoop``: the reference step simulator (SYS-1..10).

    Built from an ``EngineConfig`` and ``EngineParts``; see the module docstring for
    what one step does.
    """

    def __init__(self, config: EngineConfig, parts: EngineParts) -> None:
        check_config(config)
        self._config = config
        self._cache = parts.encoder_cache_manager(config.encoder_cache_size)
        self._hook = parts.scheduling_hook(
            SchedulerConfig(disable_chunked_mm_input=config.disable_chunked_mm_input)
        )
        self._block_hasher = parts.block_hasher(config.block_size)
        self._worker = parts.worker_store()
        self._encoder = parts.encoder(config.hidden_size)
        self._kv = KVBlockPool(config.num_kv_blocks, config.block_size)
        self._requests: dict[str, _Request] = {}
        self._waiting: deque[_Request] = deque()
        self._running: list[_Request] = []
        self._weights_version = 0
        #: the drafter (SYS-13): k look-ahead KV slots, and the hook's shift of 1
        self._lookahead = config.num_speculative_tokens
        #: async scheduling (SYS-15): the step scheduled and not yet executed
        self._async = config.async_scheduling
        self._in_flight: _Batch | None = None
        #: a hybrid model (SYS-16): chunks aligned to the recurrent state's blocks
        self._hybrid = config.mamba_block_aligned
        if self._hybrid and (self._lookahead or self._async):
            raise InvalidInputError(
                "mamba_block_aligned with a drafter or async scheduling is not specified"
            )

    # --- admission ---------------------------------------------------------------------

    def add_request(self, request: EngineRequest) -> None:
        """Queue ``request`` (SYS-9): ``InvalidInputError`` for a malformed request,
        ``AdmissionError`` for one that could never run."""
        view = self._validate(request)
        self._admission_check(request)
        state = _Request(request, view, self._block_hashes(request, ()))
        self._requests[request.request_id] = state
        self._waiting.append(state)

    def _validate(self, request: EngineRequest) -> RequestView:
        return validate_request(request, self._requests)

    def _block_hashes(self, request: EngineRequest, outputs: Sequence[int]) -> list[str]:
        """The full-block hashes of the prompt followed by ``outputs`` (PFX: images
        included), if prefix caching (``Request.block_hashes``, extended by
        ``Request.append_output_token_ids``)."""
        if not self._config.enable_prefix_caching:
            return []
        tokens = (*request.token_ids, *outputs)
        return list(self._block_hasher.request_block_hashes(tokens, request.items))

    def _admission_check(self, request: EngineRequest) -> None:
        config = self._config
        rid = request.request_id
        for index, item in enumerate(request.items):
            n = item.num_embeds
            if n > config.encoder_compute_budget:
                raise AdmissionError(
                    f"request {rid} item {index} ({item.mm_hash}) needs {n} embeddings, more "
                    f"than the per-step encoder budget of {config.encoder_compute_budget}"
                )
            if n > config.encoder_cache_size:
                raise AdmissionError(
                    f"request {rid} item {index} ({item.mm_hash}) needs {n} embeddings, more "
                    f"than the encoder cache holds ({config.encoder_cache_size})"
                )
            length = item.mm_position.length
            if config.disable_chunked_mm_input and length > config.token_budget:
                raise AdmissionError(
                    f"request {rid} item {index} ({item.mm_hash}) spans {length} tokens; with "
                    f"chunked multimodal input disabled it must fit one step's token budget "
                    f"({config.token_budget})"
                )
        positions = len(request.token_ids) + request.max_new_tokens - 1 + self._lookahead
        blocks = _ceil_div(positions, config.block_size)
        blocks += HYBRID_STATE_BLOCKS if self._hybrid else 0  # the states share the cache
        if blocks > config.num_kv_blocks:
            raise AdmissionError(
                f"request {rid} needs {blocks} KV blocks for {positions} positions, more than "
                f"the KV cache has ({config.num_kv_blocks})"
            )

    # --- lifecycle ---------------------------------------------------------------------

    def _get(self, request_id: str) -> _Request:
        state = self._requests.get(request_id)
        if state is None:
            raise UnknownRequestError(f"no unfinished request {request_id!r}")
        return state

    def abort(self, request_id: str) -> None:
        """Drop an unfinished request and release everything it holds (SYS-7)."""
        state = self._get(request_id)
        if state.status == "running":
            self._running.remove(state)
        else:
            self._waiting.remove(state)
        self._release(state)
        self._mark_stale(state)
        del self._requests[request_id]

    def preempt(self, request_id: str) -> None:
        """Preempt a running request (SYS-7); a waiting one is left as it is."""
        state = self._get(request_id)
        if state.status == "running":
            self._running.remove(state)
            self._preempt(state)

    def _preempt(self, state: _Request) -> None:
        """``Scheduler._preempt_request``: release the KV blocks and encoder references,
        ``num_computed_tokens = 0``, queue first. The generated tokens are kept: on
        resumption the request recomputes the KV of its prompt and of them (a prefix hit
        may cover both) and then samples its next token (SYS-10)."""
        self._release(state)
        state.status = "waiting"
        state.num_computed_tokens = 0
        state.spec_token_ids = []  # drafts are proposed again after the next sample
        state.num_output_placeholders = 0
        state.num_in_flight_tokens = 0
        self._mark_stale(state)
        self._waiting.appendleft(state)

    def _mark_stale(self, state: _Request) -> None:
        """A chunk of ``state`` in flight still executes, but its output is dropped
        (vLLM 0.33.0's ``drop_stale_output``): the request starts over, or is gone."""
        if self._in_flight is not None:
            for entry in self._in_flight.scheduled:
                if entry.state is state:
                    entry.stale = True

    def _release(self, state: _Request) -> None:
        self._kv.free(state.block_ids)
        state.block_ids = []
        state.num_cached_blocks = 0
        self._cache.free(state.view)

    def num_speculative_tokens(self) -> int:
        """The drafter's ``k`` (SYS-13; 0: none)."""
        return self._lookahead

    # --- between steps: resets and weights (SYS-11, SYS-12) ----------------------------

    def reset_encoder_cache(self) -> None:
        """``EngineCore.reset_encoder_cache``: the cache manager's ``reset()`` (ECM-9),
        and the worker drops everything it holds. Running requests lose their references;
        a chunk that reads an item again encodes it again."""
        self._nothing_in_flight("reset_encoder_cache()")
        reset = getattr(self._cache, "reset", None)
        if not callable(reset):
            raise NotImplementedError("the encoder cache manager has no reset() (ECM-9)")
        reset()
        held = tuple(sorted(self._worker.held_hashes()))
        self._worker.execute_step(WorkerStep(freed_mm_hashes=held, encoder_outputs={}, gathers=()))

    def reset_prefix_cache(self) -> bool:
        """``Scheduler.reset_prefix_cache()``: no block computed so far is hit again;
        ``False``, and nothing changes, while a request holds KV blocks."""
        return self._kv.reset_prefix_cache()

    def update_weights(self) -> None:
        """``EngineCore.pause_scheduler`` (``mode="keep", clear_cache=True``), then the
        next weights:
        ``EngineCore._reset_caches`` preempts every running request, last first
        (``reset_prefix_cache(reset_running_requests=True)``: they keep their generated
        tokens and recompute the rest), resets the prefix cache and the encoder cache."""
        self._nothing_in_flight("update_weights()")
        while self._running:
            self._preempt(self._running.pop())
        self.reset_prefix_cache()
        self.reset_encoder_cache()
        self._weights_version += 1

    def _nothing_in_flight(self, what: str) -> None:
        """SYS-15 does not specify the resets and weight updates with a step in flight
        (vLLM's engine core warns that a reset then may desync its caches)."""
        if self._in_flight is not None and self._in_flight.scheduled:
            raise NotImplementedError(f"{what} with a step in flight (async scheduling)")

    def async_scheduling(self) -> bool:
        """Whether this engine schedules one step ahead of the worker (SYS-15)."""
        return self._async

    def mamba_block_aligned(self) -> bool:
        """Whether this engine serves a hybrid model, its chunks aligned (SYS-16)."""
        return self._hybrid

    # --- one step ----------------------------------------------------------------------

    def step(self) -> StepOutput:
        """Schedule, encode, execute, update (see the module docstring). With async
        scheduling: schedule the next step, then execute and update the one scheduled
        by the previous call (``EngineCore.step_with_batch_queue`` with two batches)."""
        if not self._async:
            step = self._schedule()
            chunks, encoded, finished = self._run(step)
            return StepOutput(chunks, encoded, step.freed, step.preempted, finished)
        batch = self._schedule() if self._requests else None
        previous, self._in_flight = self._in_flight, batch
        chunks, encoded, finished = self._run(previous) if previous else ((), (), ())
        in_flight = () if batch is None else batch.scheduled
        return StepOutput(
            chunks=chunks,
            encoded_mm_hashes=encoded,
            freed_mm_hashes=() if previous is None else previous.freed,
            preempted=() if batch is None else batch.preempted,
            finished=finished,
            in_flight=tuple(
                ScheduledChunk(
                    e.state.request_id, e.num_computed_tokens, e.num_new_tokens,
                    e.decision.encoder_inputs_to_schedule, (),
                    num_draft_tokens=len(e.drafts),
                )
                for e in in_flight
            ),
            in_flight_encoded_mm_hashes=tuple(self._hashes_to_encode(in_flight)),
            in_flight_freed_mm_hashes=() if batch is None else batch.freed,
        )

    def _schedule(self) -> _Batch:
        """``Scheduler.schedule``: running requests, then waiting ones; the drain of
        the freed hashes; with async scheduling ``_update_after_schedule`` too (the
        frontier and the output placeholders advance now)."""
        budget = _StepBudget(self._config.token_budget, self._config.encoder_compute_budget)
        scheduled: list[_Scheduled] = []
        preempted = self._schedule_running(budget, scheduled)
        if not preempted:  # vLLM admits no waiting request in a step that preempted
            self._schedule_waiting(budget, scheduled)
        freed = tuple(self._cache.get_freed_mm_hashes())
        for entry in scheduled:
            state, end = entry.state, entry.num_computed_tokens + entry.num_new_tokens
            entry.samples = (
                end - len(entry.drafts) == state.num_tokens + state.num_output_placeholders
            )
            if self._async:
                state.num_computed_tokens = end
                state.num_in_flight_tokens += entry.num_new_tokens
                if entry.samples:  # it samples 1 + a, a of its drafts accepted
                    state.num_output_placeholders += 1 + len(entry.drafts)
                    # the step in flight counted as accepting all its drafts (fewer
                    # accepted leave the worker more proposals than these placeholders)
                    outputs = len(state.output_token_ids) + state.num_output_placeholders
                    state.spec_token_ids = [-1] * num_drafts_after(
                        state.request, outputs, self._lookahead
                    )
        return _Batch(scheduled, freed, tuple(preempted))

    def _run(
        self, batch: _Batch
    ) -> tuple[tuple[ScheduledChunk, ...], tuple[str, ...], tuple[str, ...]]:
        """Encode, execute and update one scheduled step: its chunks, the hashes it
        encoded, the requests it finished."""
        for entry in batch.scheduled:  # the worker's drafter fills the placeholders
            if entry.drafts and not entry.stale and self._async:
                entry.drafts = tuple(entry.state.drafted[: len(entry.drafts)])
        encoder_outputs = self._encode(batch.scheduled)
        chunks = self._execute(batch.scheduled, batch.freed, encoder_outputs)
        finished = self._update(batch.scheduled)
        return tuple(chunks), tuple(encoder_outputs), tuple(finished)

    def _try_schedule(
        self, state: _Request, computed: int, budget: _StepBudget
    ) -> ScheduleDecision:
        """The hook, on the chunk the token budget allows from ``computed``, with what is
        left of this step's encoder budget."""
        # a running request's drafts are scheduled after its tokens (SYS-14)
        wanted = (
            state.num_tokens + state.num_output_placeholders + len(state.spec_token_ids)
            - computed
        )
        proposed = min(wanted, budget.tokens)
        if self._hybrid:  # before the hook's cut at an item (vLLM v0.33.0's order)
            proposed = self._aligned(state, computed, proposed)
        if self._lookahead:  # the drafter reads one position ahead (SYS-13)
            return self._hook.try_schedule_encoder_inputs(
                state.view, computed, proposed, budget.encoder, self._cache,
                shift_computed_tokens=1,
            )
        return self._hook.try_schedule_encoder_inputs(
            state.view, computed, proposed, budget.encoder, self._cache
        )

    def _aligned(self, state: _Request, computed: int, proposed: int) -> int:
        """A hybrid model's chunk: cut to the recurrent state's blocks (SYS-16)."""
        return aligned_chunk(
            computed, proposed, len(state.request.token_ids), state.num_tokens,
            self._kv.block_size, self._config.token_budget, self._whole_items(state),
        )

    def _whole_items(self, state: _Request) -> list[tuple[int, int]]:
        """The ranges a chunk may not end inside (chunked multimodal input disabled)."""
        if not self._config.disable_chunked_mm_input:
            return []
        return [(i.mm_position.offset, i.mm_position.end) for i in state.request.items]

    def _schedule_running(self, budget: _StepBudget, scheduled: list[_Scheduled]) -> list[str]:
        """Running requests in order; preempts the last running request while KV blocks
        are short. Returns the ids preempted."""
        preempted: list[str] = []
        index = 0
        while index < len(self._running) and budget.tokens > 0:
            state = self._running[index]
            computed = state.num_computed_tokens
            pending = len(state.output_token_ids) + state.num_output_placeholders
            if state.num_output_placeholders and pending >= state.request.max_new_tokens:
                index += 1  # async: the step in flight samples its last token
                continue
            decision = self._try_schedule(state, computed, budget)
            new = decision.num_new_tokens
            if new == 0:  # the next item can get neither budget nor cache space
                index += 1
                continue
            end = computed + new + self._lookahead  # look-ahead slots (allocate_slots)
            needed = _ceil_div(end, self._kv.block_size) - len(state.block_ids)
            while needed > self._kv.num_free:
                victim = self._running.pop()
                self._preempt(victim)
                preempted.append(victim.request_id)
                if victim is state:
                    break
            if state.status != "running":
                break  # it preempted itself: nothing else can fit either
            state.block_ids += self._kv.allocate(max(0, needed))
            drafts = self._drafts_reached(state, computed, new)
            state.spec_token_ids = []  # the rest are dropped: new ones follow a sample
            self._commit(_Scheduled(state, computed, new, decision, drafts), budget, scheduled)
            index += 1
        return preempted

    @staticmethod
    def _drafts_reached(state: _Request, computed: int, new: int) -> tuple[int, ...]:
        """The drafts the chunk ``[computed, computed + new)`` verifies: those its
        positions past ``P + g`` (and the output placeholders) reach (vLLM's running
        loop cuts ``spec_token_ids`` to ``num_new_tokens + num_computed_tokens −
        num_tokens − num_output_placeholders``)."""
        tokens = state.num_tokens + state.num_output_placeholders
        return tuple(state.spec_token_ids[: max(0, computed + new - tokens)])

    def _schedule_waiting(self, budget: _StepBudget, scheduled: list[_Scheduled]) -> None:
        """Waiting requests in order, each starting from its longest cached prefix. One
        the hook cuts to zero is skipped; one whose KV blocks do not fit stops admission."""
        skipped: list[_Request] = []
        while self._waiting and budget.tokens > 0:
            state = self._waiting.popleft()
            hits = self._prefix_hit(state)
            computed = len(hits) * self._kv.block_size
            decision = self._try_schedule(state, computed, budget)
            new = decision.num_new_tokens
            if new == 0:
                self._release_unscheduled(state)
                skipped.append(state)
                continue
            reusable = sum(1 for block in hits if self._kv.ref_cnt[block] == 0)
            lookahead = self._lookahead if computed else 0  # as vLLM's waiting loop
            needed = _ceil_div(computed + new + lookahead, self._kv.block_size) - len(hits)
            if needed > self._kv.num_free - reusable:
                self._release_unscheduled(state)
                self._waiting.appendleft(state)
                break
            self._kv.touch(hits)
            state.block_ids = hits + self._kv.allocate(max(0, needed))
            state.num_cached_blocks = len(hits)
            state.num_computed_tokens = computed
            state.status = "running"
            self._running.append(state)
            self._commit(_Scheduled(state, computed, new, decision), budget, scheduled)
        self._waiting.extendleft(reversed(skipped))

    def _release_unscheduled(self, state: _Request) -> None:
        """A waiting request that is not scheduled after all gives back the references
        the hook took for it: a waiting request holds nothing (SYS-7)."""
        self._cache.free(state.view)

    def _commit(self, entry: _Scheduled, budget: _StepBudget, scheduled: list[_Scheduled]) -> None:
        """Schedule the chunk: charge the budgets, then ``Scheduler._allocate_encoder_inputs``:
        hold the items to encode, and reference the in-step duplicates (held now, so
        the check takes the reference)."""
        decision = entry.decision
        budget.tokens -= entry.num_new_tokens
        budget.encoder = decision.encoder_compute_budget
        view = entry.state.view
        for input_id in decision.encoder_inputs_to_schedule:
            self._cache.allocate(view, input_id)
        for input_id in decision.duplicate_encoder_inputs:
            self._cache.check_and_update_cache(view, input_id)
        scheduled.append(entry)

    def _execute(
        self,
        scheduled: Sequence[_Scheduled],
        freed: tuple[str, ...],
        encoder_outputs: dict[str, NDArray[Any]],
    ) -> list[ScheduledChunk]:
        """The worker step (drop, store, gather), then the forward pass: each computed
        position's KV records what it was computed from."""
        gathers: list[GatherSpec] = []
        per_chunk: list[int] = []
        for entry in scheduled:
            specs = self._gathers(entry)
            gathers += specs
            per_chunk.append(len(specs))
        rows = self._worker.execute_step(
            WorkerStep(
                freed_mm_hashes=freed, encoder_outputs=encoder_outputs, gathers=tuple(gathers)
            )
        )
        drafts = self._draft_gathers(scheduled)
        chunks: list[ScheduledChunk] = []
        cursor = 0
        for entry, count, draft in zip(scheduled, per_chunk, drafts, strict=True):
            gathered = tuple(rows[cursor : cursor + count])
            cursor += count
            if not entry.stale:  # a stale chunk's blocks are no longer its request's
                self._write_kv(entry)
            # the target verifies the chunk's drafts (the runner's rejection sampler)
            entry.accepted = accepted_drafts(len(entry.state.output_token_ids), entry.drafts)
            chunks.append(
                ScheduledChunk(
                    request_id=entry.state.request_id,
                    num_computed_tokens=entry.num_computed_tokens,
                    num_new_tokens=entry.num_new_tokens,
                    encoder_inputs=entry.decision.encoder_inputs_to_schedule,
                    gathered=gathered,
                    draft_gathered=draft,
                    num_draft_tokens=len(entry.drafts),
                    num_accepted_drafts=entry.accepted,
                )
            )
        return chunks

    def _draft_gathers(self, scheduled: Sequence[_Scheduled]) -> list[tuple[NDArray[Any], ...]]:
        """The drafter's gathers, after the target's, in the same worker state
        (``_gather_mm_embeddings(shift_computed_tokens=1)``): per chunk ``[c, c + n)``
        the window ``[c + 1, c + n + 1)``; an item starting at ``c + n`` only where the
        worker holds it (elsewhere the drafter falls back to token embeddings)."""
        if not self._lookahead:
            return [() for _ in scheduled]
        held = self._worker.held_hashes()
        specs = [self._draft_window(entry, held) for entry in scheduled]
        rows = self._worker.execute_step(
            WorkerStep(freed_mm_hashes=(), encoder_outputs={},
                       gathers=tuple(g for chunk in specs for g in chunk))
        )
        drafts: list[tuple[NDArray[Any], ...]] = []
        cursor = 0
        for chunk in specs:
            drafts.append(tuple(rows[cursor : cursor + len(chunk)]))
            cursor += len(chunk)
        return drafts

    @staticmethod
    def _draft_window(entry: _Scheduled, held: frozenset[str]) -> list[GatherSpec]:
        """What the drafter gathers for one chunk ``[c, c + n)``: ``[c + 1, c + n + 1)``,
        an item starting at ``c + n`` only if ``held``."""
        end = entry.num_computed_tokens + entry.num_new_tokens
        window = chunk_gathers(entry.state.request, entry.num_computed_tokens + 1,
                               entry.num_new_tokens)
        return [g for g in window if g.mm_position.offset < end or g.mm_hash in held]

    def _prefix_hit(self, state: _Request) -> list[int]:
        """Cached blocks of the request's tokens (its prompt, then those it generated
        before a preemption), at most ``num_tokens - 1`` of them
        (``KVCacheManager.get_computed_blocks``)."""
        if not self._config.enable_prefix_caching:
            return []
        max_blocks = (state.num_tokens - 1) // self._kv.block_size
        hits = self._kv.longest_cached_prefix(state.block_hashes, max_blocks)
        if self._hybrid:  # a hybrid model resumes from a cached state only (SYS-16)
            while hits and not self._kv.has_state[hits[-1]]:
                hits.pop()
        return hits

    @staticmethod
    def _hashes_to_encode(scheduled: Sequence[_Scheduled]) -> dict[str, tuple[Any, int]]:
        """The step's encodes, one per hash: its data and embedding count."""
        batch: dict[str, tuple[Any, int]] = {}
        for entry in scheduled:
            request = entry.state.request
            for input_id in entry.decision.encoder_inputs_to_schedule:
                item = request.items[input_id]
                batch.setdefault(item.mm_hash, (request.data[input_id], item.num_embeds))
        return batch

    def _encode(self, scheduled: Sequence[_Scheduled]) -> dict[str, NDArray[Any]]:
        """One encode per hash scheduled this step (ENC: batching changes nothing)."""
        batch = self._hashes_to_encode(scheduled)
        outputs = self._encoder.encode_batch(list(batch.values()))
        version = self._weights_version
        return {
            mm_hash: rows_at_weights_version(rows, version)
            for mm_hash, rows in zip(batch, outputs, strict=True)
        }

    def _gathers(self, entry: _Scheduled) -> list[GatherSpec]:
        return chunk_gathers(entry.state.request, entry.num_computed_tokens, entry.num_new_tokens)

    def _write_kv(self, entry: _Scheduled) -> None:
        """Record, per computed position, the token or embedding row it came from."""
        state = entry.state
        block_size = self._kv.block_size
        start = entry.num_computed_tokens
        for position in range(start, start + entry.num_new_tokens):
            block = state.block_ids[position // block_size]
            self._kv.sources[block][position % block_size] = self._source(
                state, position, entry.drafts
            )
            self._kv.versions[block][position % block_size] = self._weights_version

    @staticmethod
    def _source(state: _Request, position: int, drafts: Sequence[int]) -> KVSource:
        for item in state.request.items:
            placeholder = item.mm_position
            if placeholder.offset <= position < placeholder.end:
                relative = position - placeholder.offset
                if placeholder.is_embed is None or placeholder.is_embed[relative]:
                    row, _ = placeholder.get_embeds_indices_in_range(relative, relative)
                    return ("embed", item.mm_hash, row)
                break
        return ("token", state.token_at(position, drafts))

    def _update(self, scheduled: Sequence[_Scheduled]) -> list[str]:
        finished: list[str] = []
        for entry in scheduled:
            state = entry.state
            if entry.stale:
                continue  # preempted or aborted since it was scheduled: output dropped
            rejected = len(entry.drafts) - entry.accepted
            if entry.samples:  # the chunk reached P + g: it samples 1 + a
                samples = min(1 + entry.accepted,
                              state.request.max_new_tokens - len(state.output_token_ids))
                for _ in range(samples):
                    state.output_token_ids.append(sampled_token_id(len(state.output_token_ids)))
                if state.num_tokens // self._kv.block_size > len(state.block_hashes):
                    state.block_hashes = self._block_hashes(state.request, state.output_token_ids)
                self._propose_drafts(state)
            if self._async:  # the frontier moved when it was scheduled
                state.num_in_flight_tokens -= entry.num_new_tokens
                state.num_output_placeholders -= (1 + len(entry.drafts)) if entry.samples else 0
                self._roll_back_in_flight(state, rejected)
            else:  # rejected drafts roll back: their positions are computed again
                end = entry.num_computed_tokens + entry.num_new_tokens
                state.num_computed_tokens = end - rejected
                if self._hybrid and end % self._kv.block_size == 0:
                    # the recurrent state after ``end`` positions, in its block's slot
                    self._kv.has_state[state.block_ids[end // self._kv.block_size - 1]] = True
            self._cache_full_blocks(state)
            self._free_encoder_inputs(state)
            if len(state.output_token_ids) >= state.request.max_new_tokens:
                self._running.remove(state)
                self._release(state)
                del self._requests[state.request_id]
                finished.append(state.request_id)
        return finished

    def _roll_back_in_flight(self, state: _Request, rejected: int) -> None:
        """Async scheduling with a drafter: the ``rejected`` drafts roll back the
        frontier (``update_from_output``; the placeholders, ``1 + d`` for the step, go
        with its output), and the request's chunk in flight, scheduled as if they were
        accepted, executes ``rejected`` positions earlier (the model runner's correction
        of its optimistic start)."""
        if not rejected:
            return
        state.num_computed_tokens -= rejected
        if self._in_flight is not None:
            for entry in self._in_flight.scheduled:
                if entry.state is state and not entry.stale:
                    entry.num_computed_tokens -= rejected

    def _propose_drafts(self, state: _Request) -> None:
        """The drafter's proposals after a sample: the scheduler's next drafts
        (``update_draft_token_ids``), or with async scheduling the worker's, which the
        placeholders the scheduler already scheduled stand for."""
        proposals = proposed_drafts(
            state.request, len(state.output_token_ids), self._lookahead
        )
        if self._async:
            state.drafted = proposals
        else:
            state.spec_token_ids = proposals

    def _cache_full_blocks(self, state: _Request) -> None:
        """Register the newly full, computed blocks under their hashes (prompt and
        generated tokens alike, as ``KVCacheManager.allocate_slots`` caches up to
        ``num_tokens``)."""
        executed = state.num_computed_tokens - state.num_in_flight_tokens
        full = min(executed // self._kv.block_size, len(state.block_hashes))
        for index in range(state.num_cached_blocks, full):
            self._kv.cache(state.block_ids[index], state.block_hashes[index])
        state.num_cached_blocks = max(state.num_cached_blocks, full)

    def _free_encoder_inputs(self, state: _Request) -> None:
        """``Scheduler._free_encoder_inputs``, after the step: release every item the
        request references whose range is entirely computed, ``offset + length <=
        num_computed_tokens − num_output_placeholders`` (v0.33.0's rule: with async
        scheduling the frontier counts the step in flight, which may still read the
        item: its eviction is reported with a later step, executed after it)."""
        frontier = state.num_computed_tokens - state.num_output_placeholders
        for input_id in sorted(self._cache.get_cached_input_ids(state.view)):
            if state.request.items[input_id].mm_position.end <= frontier:
                self._cache.free_encoder_input(state.view, input_id)

    # --- observation -------------------------------------------------------------------

    def snapshot(self) -> EngineSnapshot:
        block_size = self._kv.block_size
        requests: dict[str, RequestSnapshot] = {}
        for request_id, state in self._requests.items():
            sources: list[KVSource] = []
            versions: list[int] = []
            for position in range(state.num_computed_tokens - state.num_in_flight_tokens):
                block, slot = state.block_ids[position // block_size], position % block_size
                source = self._kv.sources[block][slot]
                if source is None:
                    raise AssertionError(f"{request_id}: position {position} has no KV")
                sources.append(source)
                versions.append(self._kv.versions[block][slot])
            requests[request_id] = RequestSnapshot(
                request_id=request_id,
                status=state.status,
                num_computed_tokens=state.num_computed_tokens,
                output_token_ids=tuple(state.output_token_ids),
                kv_block_ids=tuple(state.block_ids),
                kv_sources=tuple(sources),
                kv_weights_versions=tuple(versions),
                num_in_flight_tokens=state.num_in_flight_tokens,
            )
        return EngineSnapshot(
            requests=requests,
            num_kv_blocks_in_use=self._kv.num_in_use,
            encoder_cache_refs={
                mm_hash: frozenset(ids) for mm_hash, ids in self._cache.cached.items()
            },
            encoder_cache_free_slots=self._cache.num_free_slots,
            worker_held=self._worker.held_hashes(),
            encoder_num_calls=self._encoder.num_calls,
        )

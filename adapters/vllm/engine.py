"""vLLM's v1 ``Scheduler`` behind ``spec.components.EngineLoop`` (SYS-1..10).

Each :meth:`VllmEngineLoop.step` is one turn of vLLM's engine core
(``EngineCore.step``): ``Scheduler.schedule()``, the worker's answer to the
``SchedulerOutput`` (:mod:`adapters.vllm.engine_worker`, the model-runner stand-in),
then ``Scheduler.update_from_output()``. Chunk sizes, prefix hits (vLLM's
``KVCacheManager`` with multimodal block-hash extra keys), preemption under KV
pressure, the encoder-scheduling hook, ``_free_encoder_inputs``, the drain of
``get_freed_mm_hashes`` into ``free_encoder_mm_hashes`` and finishing at
``max_tokens`` are vLLM's. The machine's other actions are vLLM's own entry points:

- ``abort`` is ``Scheduler.finish_requests(id, RequestStatus.FINISHED_ABORTED)``, as
  the engine core aborts a request;
- ``preempt`` does what vLLM's ``reset_prefix_cache(reset_running_requests=True)`` does
  to preempt running requests from outside ``schedule()``, for one request: pop it
  from ``Scheduler.running``, ``Scheduler._preempt_request``, and forget that it was
  scheduled in the previous step (``prev_step_scheduled_req_ids``: a request resumed
  in the next step must not look scheduled in the prior one; 0.22.1 asserts it in
  ``_make_cached_request_data``).

What stands in (docs/vllm.md): the request validation and admission of vLLM's input
processor (:func:`validate_request`, :func:`admission_problem`), and the model runner.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

from spec.adapter import EngineParts
from spec.components import (
    EngineSnapshot,
    KVSource,
    RequestSnapshot,
    ScheduledChunk,
    StepOutput,
)
from spec.errors import AdmissionError, InvalidInputError, UnknownRequestError
from spec.types import EngineConfig, EngineRequest

from .engine_admission import admission_problem, check_config, validate_request
from .engine_build import NULL_BLOCK_ID, build_scheduler, machine_block_id
from .engine_core import ExecutorStandIn, core_shim
from .engine_worker import EngineWorker
from .requests_bridge import processed_data, vllm_feature
from .runner_v2 import VllmV2WorkerStore
from .versions import DEFAULT_PREFIX_CACHING_HASH_ALGO, Api, VllmCode

#: ``init_none_hash`` sets a process-wide seed; the engine core calls it once.
_none_hash_ready: set[int] = set()


class VllmEngineLoop:
    """``spec.components.EngineLoop`` whose scheduler is vLLM's ``Scheduler``."""

    def __init__(
        self,
        code: VllmCode,
        api: Api,
        config: EngineConfig,
        parts: EngineParts,
        runner_v2: bool = False,
    ):
        check_config(config)
        self._code = code
        self._config = config
        store = parts.worker_store()
        if runner_v2:
            if not isinstance(store, VllmV2WorkerStore):
                raise TypeError(
                    "a Scheduler built for model runner V2 needs V2's encoder cache behind "
                    f"the worker store, not {type(store).__name__}"
                )
        built = build_scheduler(code, config, runner_v2)
        self.scheduler = built.scheduler
        self._status = code.module("request").RequestStatus
        self._runner_output = code.module("outputs").ModelRunnerOutput
        self._worker = EngineWorker(
            parts.encoder(config.hidden_size),
            store,
            config.num_kv_blocks + 1,
            config.block_size,
            drafter=bool(config.num_speculative_tokens),
            async_drafts=config.num_speculative_tokens if config.async_scheduling else 0,
            code=code,
        )
        self._block_hasher = (
            self._request_block_hasher(api) if config.enable_prefix_caching else None
        )
        #: unfinished requests: the machine's request and vLLM's
        self._requests: dict[str, tuple[EngineRequest, Any]] = {}
        self._core: Any = None
        #: async scheduling (SYS-15): the SchedulerOutput scheduled and not yet executed,
        #: and the requests aborted (or, with a drafter, finished) since, whose chunks in
        #: it the worker still runs
        self._in_flight: Any = None
        self._aborted: dict[str, tuple[EngineRequest, Any]] = {}
        #: the KV slots (vLLM block id, slot) the step in flight will write
        self._pending_slots: set[tuple[int, int]] = set()

    def _request_block_hasher(self, api: Api) -> Any:
        """The hasher the engine core gives every ``Request`` when prefix caching is on."""
        kv = self._code.module("kv_cache_utils")
        hashing = self._code.module("hashing" if api.has("hash_fn_module") else "utils")
        hash_fn = hashing.get_hash_fn_by_name(DEFAULT_PREFIX_CACHING_HASH_ALGO)
        if id(kv) not in _none_hash_ready:
            kv.init_none_hash(hash_fn)
            _none_hash_ready.add(id(kv))
        # with an EAGLE drafter 0.33.0 hashes each block with the token after it
        # (``num_hash_lookahead_tokens``), as the engine core's hasher does
        lookahead = int(getattr(self.scheduler, "num_hash_lookahead_tokens", 0))
        if lookahead:
            return kv.get_request_block_hasher(self._config.block_size, hash_fn, lookahead)
        return kv.get_request_block_hasher(self._config.block_size, hash_fn)

    # --- requests -------------------------------------------------------------------

    def add_request(self, request: EngineRequest) -> None:
        validate_request(request, self._requests)
        problem = admission_problem(self._config, request)
        if problem is not None:
            raise AdmissionError(problem)
        sampling = self._code.module("sampling_params").SamplingParams(
            max_tokens=request.max_new_tokens
        )
        vllm_request = self._code.module("request").Request(
            request_id=request.request_id,
            prompt_token_ids=list(request.token_ids),
            sampling_params=sampling,
            pooling_params=None,
            mm_features=[
                vllm_feature(self._code, item, processed_data(self._code))
                for item in request.items
            ],
            block_hasher=self._block_hasher,
        )
        self.scheduler.add_request(vllm_request)
        self._requests[request.request_id] = (request, vllm_request)

    def _get(self, request_id: str) -> Any:
        entry = self._requests.get(request_id)
        if entry is None:
            raise UnknownRequestError(f"no unfinished request {request_id!r}")
        return entry[1]

    def abort(self, request_id: str) -> None:
        self._get(request_id)
        self.scheduler.finish_requests(request_id, self._status.FINISHED_ABORTED)
        if self._in_flight is not None and request_id in self._in_flight.num_scheduled_tokens:
            self._aborted[request_id] = self._requests[request_id]  # its chunk still runs
        del self._requests[request_id]

    def preempt(self, request_id: str) -> None:
        vllm_request = self._get(request_id)
        if vllm_request.status != self._status.RUNNING:
            return
        self.scheduler.running.remove(vllm_request)
        preempt = self.scheduler._preempt_request
        if not self._config.async_scheduling:
            preempt(vllm_request, time.monotonic())
        elif "drop_stale_output" in inspect.signature(preempt).parameters:
            preempt(vllm_request, time.monotonic(), drop_stale_output=True)  # 0.33.0
        else:  # 0.22.1: the frames in flight are discarded when they return
            preempt(vllm_request, time.monotonic())
            vllm_request.async_tokens_to_discard = vllm_request.num_output_placeholders
            vllm_request.num_output_placeholders = 0
        self.scheduler.prev_step_scheduled_req_ids.discard(request_id)

    def async_scheduling(self) -> bool:
        """Whether the scheduler is vLLM's ``AsyncScheduler``, one step ahead (SYS-15)."""
        return self._config.async_scheduling

    def mamba_block_aligned(self) -> bool:
        """Whether vLLM's Scheduler splits chunks for a Mamba group in "align" mode
        (SYS-16): ``need_mamba_block_aligned_split``, built from the config's group."""
        return bool(getattr(self.scheduler, "need_mamba_block_aligned_split", False))

    def num_speculative_tokens(self) -> int:
        """The drafter's ``k`` (SYS-13, SYS-14): vLLM's ``Scheduler.num_lookahead_tokens``
        with the EAGLE stand-in config; the stand-in runner verifies and proposes drafts."""
        return int(self.scheduler.num_lookahead_tokens)

    # --- between steps: vLLM's engine core resets and pauses (SYS-11, SYS-12) --------

    def _engine_core(self) -> Any:
        """vLLM's ``EngineCore`` functions over this scheduler and worker
        (:mod:`adapters.vllm.engine_core`)."""
        if self._core is None:
            engine_core = self._code.module("engine_core").EngineCore
            self._core = core_shim(engine_core, self.scheduler, ExecutorStandIn(self._worker.store))
        return self._core

    def reset_encoder_cache(self) -> None:
        """``EngineCore.reset_encoder_cache``: the scheduler's cache manager and the
        runner's encoder cache."""
        self._engine_core().reset_encoder_cache()

    def reset_prefix_cache(self) -> bool:
        """``EngineCore.reset_prefix_cache()`` (running requests are not reset)."""
        answer: bool = self._engine_core().reset_prefix_cache(
            reset_running_requests=False, reset_connector=False
        )
        return answer

    def update_weights(self) -> None:
        """A weight sync as vLLM's RL integrations do it with requests in flight:
        ``pause_generation(mode="keep", clear_cache=True)`` (``EngineCore.pause_scheduler``:
        ``_reset_caches`` preempts every running request, resets the prefix, multimodal
        and encoder caches), the new weights, ``resume_generation``
        (``EngineCore.resume_scheduler``)."""
        core = self._engine_core()
        core.pause_scheduler(mode="keep", clear_cache=True)
        self._worker.weights_version += 1
        core.resume_scheduler()

    # --- one step -------------------------------------------------------------------

    def step(self) -> StepOutput:
        if self._config.async_scheduling:
            return self._step_async()
        preemptions = {rid: r.num_preemptions for rid, (_, r) in self._requests.items()}
        scheduler_output = self.scheduler.schedule()
        preempted = tuple(
            rid for rid, (_, r) in self._requests.items() if r.num_preemptions > preemptions[rid]
        )
        answer = self._worker.execute(scheduler_output, self._requests, self._runner_output)
        self.scheduler.update_from_output(scheduler_output, answer.model_runner_output)
        finished = tuple(
            chunk.request_id
            for chunk in answer.chunks
            if self._requests[chunk.request_id][1].is_finished()
        )
        for request_id in finished:
            del self._requests[request_id]
        if self._config.num_speculative_tokens:
            self._post_step(scheduler_output, [c.request_id for c in answer.chunks])
        return StepOutput(
            chunks=answer.chunks,
            encoded_mm_hashes=answer.encoded_mm_hashes,
            freed_mm_hashes=tuple(str(h) for h in scheduler_output.free_encoder_mm_hashes),
            preempted=preempted,
            finished=finished,
        )

    def _step_async(self) -> StepOutput:
        """``EngineCore.step_with_batch_queue`` with a queue of two: schedule the next
        step (if the scheduler has requests), then execute and update the one scheduled
        by the previous call; the chunks of requests aborted or preempted since still
        execute (vLLM's update skips or discards their output)."""
        preemptions = {rid: r.num_preemptions for rid, (_, r) in self._requests.items()}
        scheduled = self.scheduler.schedule() if self.scheduler.has_requests() else None
        preempted = tuple(
            rid for rid, (_, r) in self._requests.items() if r.num_preemptions > preemptions[rid]
        )
        previous, self._in_flight = self._in_flight, scheduled
        tables = self._block_tables(scheduled)  # before the update frees any
        chunks: tuple[ScheduledChunk, ...] = ()
        encoded: tuple[str, ...] = ()
        freed: tuple[str, ...] = ()
        finished: tuple[str, ...] = ()
        if previous is not None:
            known = {**self._requests, **self._aborted}
            answer = self._worker.execute(previous, known, self._runner_output)
            self.scheduler.update_from_output(previous, answer.model_runner_output)
            self._aborted.clear()
            chunks, encoded = answer.chunks, answer.encoded_mm_hashes
            freed = tuple(str(h) for h in previous.free_encoder_mm_hashes)
            finished = tuple(
                c.request_id for c in chunks
                if c.request_id in self._requests
                and self._requests[c.request_id][1].is_finished()
            )
            for request_id in finished:
                if scheduled is not None and request_id in scheduled.num_scheduled_tokens:
                    # scheduled before its drafts were accepted: its chunk still runs
                    self._aborted[request_id] = self._requests[request_id]
                del self._requests[request_id]
        # where the worker will execute the step in flight: its starts corrected by the
        # drafts the step just executed rejected (async scheduling with a drafter)
        starts = {} if scheduled is None else self._worker.start_of(scheduled)
        self._pending_slots = self._slots_written(scheduled, starts, tables)
        return StepOutput(
            chunks, encoded, freed, preempted, finished, *self._describe(scheduled, starts)
        )

    def _block_tables(self, scheduled: Any) -> dict[str, list[int]]:
        """The block tables of the requests ``scheduled`` has chunks for."""
        if scheduled is None:
            return {}
        return {rid: self._block_ids(rid) for rid in scheduled.num_scheduled_tokens}

    def _slots_written(
        self, scheduled: Any, starts: dict[str, int], tables: dict[str, list[int]]
    ) -> set[tuple[int, int]]:
        """The KV slots the chunks of ``scheduled`` compute, through the block tables the
        scheduler gave them (a prefix hit of another request may share them)."""
        if scheduled is None:
            return set()
        size = self._config.block_size
        slots: set[tuple[int, int]] = set()
        for request_id, new in scheduled.num_scheduled_tokens.items():
            blocks = tables[request_id]
            for position in range(starts[request_id], starts[request_id] + int(new)):
                slots.add((blocks[position // size], position % size))
        return slots

    def _describe(
        self, scheduled: Any, starts: dict[str, int]
    ) -> tuple[tuple[ScheduledChunk, ...], tuple[str, ...], tuple[str, ...]]:
        """The step left in flight: its chunks (where they will execute, with the drafts
        they verify), the hashes it encodes and frees."""
        if scheduled is None:
            return (), (), ()
        inputs = scheduled.scheduled_encoder_inputs
        store = self._worker.store
        if isinstance(store, VllmV2WorkerStore):  # V2 skips a hash it will still hold
            will = store.predicted_encodes(scheduled)
            inputs = {
                rid: [i for i in ids if (rid, int(i)) in will] for rid, ids in inputs.items()
            }
        spec = scheduled.scheduled_spec_decode_tokens
        chunks = tuple(
            ScheduledChunk(
                rid, starts[rid], int(new), tuple(int(i) for i in inputs.get(rid, ())), (),
                num_draft_tokens=len(spec.get(rid, ())),
            )
            for rid, new in scheduled.num_scheduled_tokens.items()
        )
        known = {**self._aborted, **self._requests}
        encoded = tuple(
            known[rid][0].items[int(i)].mm_hash for rid, ids in inputs.items() for i in ids
        )
        return chunks, encoded, tuple(str(h) for h in scheduled.free_encoder_mm_hashes)

    def _in_flight_tokens(self, blocks: list[int], computed: int) -> int:
        """How many of the last computed positions wait for the step in flight to write
        their KV: the request's own chunk, and a prefix hit on blocks another request's
        chunk in flight computes (vLLM caches a block's hash when it is scheduled)."""
        size = self._config.block_size
        for position in range(computed):
            if (blocks[position // size], position % size) in self._pending_slots:
                return computed - position
        return 0

    def _post_step(self, scheduler_output: Any, order: list[str]) -> None:
        """``EngineCore.post_step`` with a drafter (sync scheduling): the drafter's
        proposals go to ``Scheduler.update_draft_token_ids``; none in a step whose
        ``SchedulerOutput`` says they would go unused (0.33.0's ``skip_drafts``)."""
        if getattr(scheduler_output, "skip_drafts", False):
            return
        req_ids, drafts = self._worker.propose(
            self._config.num_speculative_tokens, order, self._requests
        )
        draft_token_ids = self._code.module("outputs").DraftTokenIds
        self.scheduler.update_draft_token_ids(draft_token_ids(req_ids, drafts))

    def _block_ids(self, request_id: str) -> list[int]:
        """vLLM's block table of the request (its attention group)."""
        return [int(b) for b in self.scheduler.kv_cache_manager.get_block_ids(request_id)[0]]

    def _state_block_ids(self, request_id: str) -> list[int]:
        """The blocks a hybrid model's Mamba group holds for the request (its states:
        the null block stands where a state is skipped), from the same pool."""
        groups = self.scheduler.kv_cache_manager.get_block_ids(request_id)
        return [int(b) for group in groups[1:] for b in group if int(b) != NULL_BLOCK_ID]

    # --- observation ----------------------------------------------------------------

    def snapshot(self) -> EngineSnapshot:
        requests: dict[str, RequestSnapshot] = {}
        block_size = self._config.block_size
        for request_id, (_, vllm_request) in self._requests.items():
            blocks = self._block_ids(request_id)
            computed = int(vllm_request.num_computed_tokens)
            in_flight = self._in_flight_tokens(blocks, computed)
            sources: list[KVSource] = []
            versions: list[int] = []
            for position in range(computed - in_flight):
                block, slot = blocks[position // block_size], position % block_size
                source = self._worker.kv_sources[block][slot]
                if source is None:
                    raise AssertionError(f"{request_id}: position {position} has no KV")
                sources.append(source)
                versions.append(self._worker.kv_versions[block][slot])
            requests[request_id] = RequestSnapshot(
                request_id=request_id,
                status="running" if vllm_request.status == self._status.RUNNING else "waiting",
                num_computed_tokens=computed,
                output_token_ids=tuple(int(t) for t in vllm_request.output_token_ids),
                kv_block_ids=tuple(
                    machine_block_id(b) for b in (*blocks, *self._state_block_ids(request_id))
                ),
                kv_sources=tuple(sources),
                kv_weights_versions=tuple(versions),
                num_in_flight_tokens=in_flight,
            )
        pool = self.scheduler.kv_cache_manager.block_pool
        cache = self.scheduler.encoder_cache_manager
        return EngineSnapshot(
            requests=requests,
            num_kv_blocks_in_use=self._config.num_kv_blocks - int(pool.get_num_free_blocks()),
            encoder_cache_refs={h: frozenset(ids) for h, ids in cache.cached.items()},
            encoder_cache_free_slots=int(cache.num_free_slots),
            worker_held=self._worker.store.held_hashes(),
            encoder_num_calls=self._worker.encoder.num_calls,
        )


def engine_loop_factory(code: VllmCode, api: Api, runner_v2: bool = False) -> Any:
    def build(config: EngineConfig, parts: EngineParts) -> VllmEngineLoop:
        if not isinstance(config, EngineConfig):
            raise InvalidInputError(f"config must be an EngineConfig, got {type(config).__name__}")
        return VllmEngineLoop(code, api, config, parts, runner_v2)

    return build

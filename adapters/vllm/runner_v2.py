"""vLLM's model runner V2 behind ``spec.components.WorkerStore`` (WRK-1..5; issue 35).

0.33.0 runs a multimodal model on model runner V2 by default
(``vllm.v1.worker.gpu.model_runner.GPUModelRunner``), and 0.22.1 ships it behind
``VLLM_USE_V2_MODEL_RUNNER=1``. Its multimodal state is two small classes, built here
with their own constructors:

- ``mm/encoder_cache.py::EncoderCache``: ``mm_features`` per installed request and
  ``encoder_outputs`` per ``mm_hash``; ``free_encoder_cache`` pops one hash
  (``pop(mm_hash, None)``), ``reset_encoder_cache`` clears them all;
- ``mm/encoder_runner.py::EncoderRunner``: ``prepare_mm_inputs`` picks the scheduled
  features to encode (skipping one whose data did not reach the worker and, since
  0.33.0, one whose hash is already held), ``execute_mm_encoder`` batches them
  (``group_and_batch_mm_kwargs``) through the model's ``embed_multimodal`` and
  ``sanity_check_mm_encoder_outputs``, and ``gather_mm_embeddings`` serves each
  scheduled request's window (``get_embeds_indices_in_range``), raising the release's
  miss (0.22.1 ``assert``, 0.33.0 ``RuntimeError``).

Per step, in ``GPUModelRunner.execute_model``'s order: **free** — ``free_states``, one
``EncoderCache.free_encoder_cache`` per hash of ``free_encoder_mm_hashes``; **store** —
0.33.0's ``ModelState.execute_mm_encoder`` (``model_states/interface.py``: prepare,
encode, ``encoder_outputs.update``), or in 0.22.1 the same three lines at the top of
``DefaultModelState.get_mm_embeddings``, which also builds the input embeddings from a
whole input batch: for 0.22.1 the store runs those three lines itself (the one stand-in
for vLLM code, row ``runner_v2_encode_method`` of :mod:`adapters.vllm.versions`);
**gather** — ``EncoderRunner.gather_mm_embeddings``.

What stands in, and nothing else is read (tests/test_vllm_runner.py runs a profiler over
the three): the passthrough model of :mod:`adapters.vllm.runner` (its
``embed_multimodal`` returns the rows the batch carries; not realtime), ``device`` = cpu,
``PIN_MEMORY`` = False, an ``inputs_embeds`` buffer of one row (only
``get_inputs_embeds`` writes it, never called here); the request features, built by
vLLM's constructors, registered with ``EncoderCache.add_request`` for the step and
removed with ``remove_request`` after it; the batch arrays ``gather_mm_embeddings``
takes. Each gather window is one request of the batch (as in :mod:`adapters.vllm.runner`)
whose prompt ends where the window ends: the runner skips a request whose computed
tokens reach its prompt's length (a decode), and a window that gathers an item lies
inside the prompt, so that test is false for it with the real length as with this one.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from spec.types import GatherSpec, WorkerStep

from .runner import (
    PassthroughModel,
    Window,
    feature_spec,
    misses_reported,
    per_gather,
    windows_of,
)
from .versions import Api, VllmCode

#: The request whose features carry the step's encoder outputs into the encode path.
_ENCODE_REQUEST = "mmspec-encoder-outputs"


class VllmV2WorkerStore:
    """``spec.components.WorkerStore`` over model runner V2's ``EncoderCache``."""

    def __init__(self, code: VllmCode, api: Api) -> None:
        self._code = code
        self._encode_method = api.has("runner_v2_encode_method")
        runner_module = code.module("v2_encoder_runner")
        setattr(runner_module, "PIN_MEMORY", False)  # noqa: B010 - the CPU has no pinned memory
        self.cache = code.module("v2_encoder_cache").EncoderCache()
        self.runner = runner_module.EncoderRunner(
            PassthroughModel(), 1, 1, self.cache, torch.float32, torch.device("cpu")
        )
        #: what ``ModelState.execute_mm_encoder`` reads of its model state
        self._model_state = SimpleNamespace(encoder_runner=self.runner, encoder_cache=self.cache)

    # --- the Protocol ----------------------------------------------------------------

    def held_hashes(self) -> frozenset[str]:
        return frozenset(self.cache.encoder_outputs)

    def execute_step(self, step: WorkerStep) -> list[NDArray[Any]]:
        outputs = {
            h: torch.tensor(np.array(rows, copy=True)) for h, rows in step.encoder_outputs.items()
        }
        for mm_hash in step.freed_mm_hashes:  # GPUModelRunner.free_states
            self.cache.free_encoder_cache(mm_hash)
        self._store(outputs)
        return self._gather(step.gathers)

    def reset_encoder_cache(self) -> None:
        """``GPUModelRunner.reset_encoder_cache`` → ``EncoderCache.reset_encoder_cache``."""
        self.cache.reset_encoder_cache()

    # --- the engine loop's worker (adapters/vllm/engine_worker.py) -------------------

    def install(self, scheduler_output: Any) -> None:
        """What V2's ``GPUModelRunner.execute_model`` does to the encoder cache before it
        encodes, in its order: ``finish_requests`` removes the features of every finished
        and preempted request (``_remove_request``); ``free_states`` — vLLM's own
        method — frees the step's ``free_encoder_mm_hashes``; ``add_requests`` installs
        each new request's ``mm_features``, a resumed one's again (V2's scheduler sends
        it as new, its data stripped where its progress covers it), replacing what it
        had; then each of the scheduler's ``encoder_input_updates`` (0.33.0: a rewound
        request's data resent, a computed item's dropped). The encoder-cache lines of
        ``finish_requests`` and ``add_requests`` run here: those methods also keep the
        batch's other states, which this worker has no part of."""
        cached = scheduler_output.preempted_req_ids or ()
        for req_id in sorted({*scheduler_output.finished_req_ids, *cached}):
            self.cache.remove_request(req_id)
        self._code.module("v2_model_runner").GPUModelRunner.free_states(
            self._model_state, scheduler_output
        )
        for new in scheduler_output.scheduled_new_reqs:
            self.cache.remove_request(new.req_id)
            self.cache.add_request(new.req_id, new.mm_features)
        for req_id, updates in getattr(scheduler_output, "encoder_input_updates", {}).items():
            self.cache.update_encoder_inputs(req_id, updates)

    def runner_encodes(self, scheduled_encoder_inputs: Mapping[str, list[int]]) -> set[
        tuple[str, int]
    ]:
        """The scheduled inputs (request id, input id) V2 encodes: those
        ``EncoderRunner.prepare_mm_inputs`` picks from the installed features (it skips
        one whose data did not reach the worker and, since 0.33.0, one whose hash is
        held), told apart by the identity of the data it returns."""
        _hashes, kwargs = self.runner.prepare_mm_inputs(dict(scheduled_encoder_inputs))
        kept = {id(data) for _modality, data in kwargs}
        features = self.cache.mm_features
        return {
            (req_id, int(input_id))
            for req_id, input_ids in scheduled_encoder_inputs.items()
            for input_id in input_ids
            if (data := features[req_id][input_id].data) is not None and id(data) in kept
        }

    def predicted_encodes(self, scheduler_output: Any) -> set[tuple[str, int]]:
        """What :meth:`runner_encodes` will answer when this worker executes
        ``scheduler_output`` next (async scheduling: the step left in flight): V2's own
        install and ``prepare_mm_inputs`` run on a copy of its encoder cache (the
        features per request and the outputs held), which nothing else changes before
        that step executes."""
        shadow = copy.copy(self)
        shadow.cache = copy.copy(self.cache)
        shadow.cache.mm_features = {k: list(v) for k, v in self.cache.mm_features.items()}
        shadow.cache.encoder_outputs = dict(self.cache.encoder_outputs)
        shadow.runner = copy.copy(self.runner)
        shadow.runner.encoder_cache = shadow.cache
        shadow._model_state = SimpleNamespace(
            encoder_runner=shadow.runner, encoder_cache=shadow.cache
        )
        shadow.install(scheduler_output)
        return shadow.runner_encodes(scheduler_output.scheduled_encoder_inputs)

    def draft_gather(
        self, request_id: str, start: int, new: int, prompt_len: int
    ) -> tuple[NDArray[Any], ...]:
        """The drafter's gather after the target's (V2's ``execute_model``:
        ``gather_mm_embeddings(input_batch, draft_lookahead=1)``) for one installed
        request whose chunk is ``[start, start + new)``: its features as installed, the
        window shifted by one, V2's own fallback for an item starting where the chunk
        ends and not held (token embeddings: no rows)."""
        scheduled = np.array([new], dtype=np.int32)
        with misses_reported():
            embeds, _ = self.runner.gather_mm_embeddings(
                [request_id], new, scheduled, np.array([0, new], dtype=np.int32),
                np.array([prompt_len], dtype=np.int32), np.array([start], dtype=np.int32),
                draft_lookahead=1,
            )
        return tuple(embed.numpy().copy() for embed in embeds)

    # --- vLLM's methods --------------------------------------------------------------

    def _store(self, outputs: Mapping[str, torch.Tensor]) -> None:
        if not outputs:
            return
        features = [feature_spec(self._code, h, rows) for h, rows in outputs.items()]
        scheduled = {_ENCODE_REQUEST: list(range(len(features)))}
        self.cache.add_request(_ENCODE_REQUEST, features)
        try:
            if self._encode_method:
                self._code.module("v2_model_state").ModelState.execute_mm_encoder(
                    self._model_state, scheduled
                )
            else:  # 0.22.1: the first three lines of DefaultModelState.get_mm_embeddings
                mm_hashes, mm_kwargs = self.runner.prepare_mm_inputs(scheduled)
                if mm_kwargs:
                    encoded = self.runner.execute_mm_encoder(mm_kwargs)
                    self.cache.encoder_outputs.update(zip(mm_hashes, encoded, strict=True))
        finally:
            self.cache.remove_request(_ENCODE_REQUEST)

    def _gather(self, gathers: Sequence[GatherSpec]) -> list[NDArray[Any]]:
        windows = windows_of(gathers)
        if not windows:
            return []
        req_ids = [f"{window.request_id}#{number}" for number, window in enumerate(windows)]
        features = [
            [feature_spec(self._code, g.mm_hash, None, g) for g in window.gathers]
            for window in windows
        ]
        for req_id, window_features in zip(req_ids, features, strict=True):
            self.cache.add_request(req_id, window_features)
        try:
            embeds = self._run_gather(req_ids, windows)
        finally:
            for req_id in req_ids:
                self.cache.remove_request(req_id)
        return per_gather(windows, features, embeds, len(gathers), self.cache.encoder_outputs)

    def _run_gather(self, req_ids: list[str], windows: Sequence[Window]) -> list[torch.Tensor]:
        scheduled = np.array([w.end - w.start for w in windows], dtype=np.int32)
        starts = np.array([w.start for w in windows], dtype=np.int32)
        query_start_loc = np.concatenate([[0], np.cumsum(scheduled)]).astype(np.int32)
        prompt_ends = np.array([w.end for w in windows], dtype=np.int32)
        with misses_reported():
            embeds, _ = self.runner.gather_mm_embeddings(
                req_ids, int(scheduled.sum()), scheduled, query_start_loc, prompt_ends, starts
            )
        return list(embeds)

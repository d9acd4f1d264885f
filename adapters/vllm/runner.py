"""vLLM's model runner behind ``spec.components.WorkerStore`` (WRK-1..5; issue 35).

The worker half of every multimodal step is three pieces of ``GPUModelRunner`` over one
dict, ``self.encoder_cache: dict[str, Tensor]``, and this store runs the release's own
methods on a runner built without ``__init__`` (no device, no model, no weights):

- **free**: ``_process_encoder_cache_scheduler_output`` (0.33.0) pops every hash of
  ``free_encoder_mm_hashes``; 0.22.1 does the same two lines inline in
  ``_update_states``, a method that rebuilds the whole persistent batch, so for 0.22.1
  the store runs those two lines itself (the one stand-in for vLLM code, row
  ``runner_free_method`` of :mod:`adapters.vllm.versions`);
- **store**: ``_execute_mm_encoder`` — ``_batch_mm_inputs_from_scheduler`` reads the
  scheduled items' ``MultiModalKwargsItem``\\ s, ``group_and_batch_mm_kwargs`` batches
  them, the model's ``embed_multimodal`` runs, ``sanity_check_mm_encoder_outputs`` checks
  its result and the outputs are cached by ``mm_hash`` (0.33.0 through
  ``_cache_encoder_output``). The model is the stand-in: a passthrough whose
  ``embed_multimodal`` returns the rows it is given, so the step's encoder outputs reach
  the cache through every line of vLLM's encode path;
- **gather**: ``_gather_mm_embeddings(scheduler_output)`` — the rows of each scheduled
  request's window, per item (``get_embeds_indices_in_range``), the miss raised as the
  release raises it (0.22.1 ``assert``, 0.33.0 ``RuntimeError``).

The order — free, store, gather — is ``execute_model``'s in both releases
(``_update_states`` before ``_execute_mm_encoder`` before ``_gather_mm_embeddings``).

What stands in, and nothing else is read (tests/test_vllm_runner.py runs a profiler over
the three methods): the runner's attributes those methods read (``encoder_cache``,
``requests``, ``input_batch.req_ids``, ``model``, ``device`` = cpu, ``pin_memory`` and
``PIN_MEMORY`` = False (the CPU has no pinned memory), no observability, LoRA, pruning,
M-RoPE, sequential video encoding or encoder CUDA graphs, a late-interaction runner
whose ``clear`` has nothing to clear — ``reset_encoder_cache`` calls it); a request state
per scheduled window holding ``num_computed_tokens`` and ``mm_features`` (vLLM's
``MultiModalFeatureSpec`` and ``PlaceholderRange``, built by vLLM's constructors); a
``SchedulerOutput`` holding the fields the methods read; the passthrough model.

The spec's vocabulary maps onto one ``_gather_mm_embeddings`` call per step: each run of
consecutive gathers of one request whose windows are one chunk's (the engine's gathers
always are) is one request of the input batch, scheduled over that window; any other
gather is a request of its own. Arrays cross the boundary as copies (numpy to torch,
then the gathered slices back), as an encoder's fresh output and the splice's scatter do
in vLLM; a miss becomes the spec's ``MissingEmbeddingError`` with vLLM's message
unchanged (WRK-5 judges the message).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from spec.errors import MissingEmbeddingError
from spec.types import GatherSpec, MultiModalItem, WorkerStep

from .requests_bridge import MODALITY, vllm_feature, vllm_placeholder_range
from .versions import Api, VllmCode

#: vLLM's message on a miss (both releases).
MISS = "Encoder cache miss for"


@contextlib.contextmanager
def misses_reported() -> Iterator[None]:
    """A gather's miss — 0.22.1's ``AssertionError``, 0.33.0's ``RuntimeError`` — as the
    spec's ``MissingEmbeddingError``, vLLM's message unchanged; anything else as is."""
    try:
        yield
    except (AssertionError, RuntimeError) as error:
        if MISS in str(error):
            raise MissingEmbeddingError(str(error)) from error
        raise

#: The kwargs key the passthrough model reads its rows from.
_ROWS = "mmspec_rows"

#: The request state that carries the step's encoder outputs into ``_execute_mm_encoder``.
_ENCODE_REQUEST = "mmspec-encoder-outputs"


class PassthroughModel:
    """The model stand-in: ``embed_multimodal`` returns the rows the batch carries (a
    stacked tensor, or a list where the items' shapes differ — as a model's output)."""

    def embed_multimodal(self, **kwargs: Any) -> Any:
        return kwargs[_ROWS]


class LateInteractionStandIn:
    """``reset_encoder_cache`` also clears the late-interaction (pooling) runner's state:
    there is none here."""

    def clear(self) -> None:
        """Nothing to clear."""


@dataclass
class RequestState:
    """What ``_gather_mm_embeddings`` and ``_batch_mm_inputs_from_scheduler`` read of a
    ``CachedRequestState``."""

    num_computed_tokens: int
    mm_features: list[Any]


@dataclass
class InputBatch:
    """What ``_gather_mm_embeddings`` reads of the persistent batch."""

    req_ids: list[str] = field(default_factory=list)


@dataclass
class SchedulerOutputFields:
    """The ``SchedulerOutput`` fields the three methods read."""

    total_num_scheduled_tokens: int = 0
    num_scheduled_tokens: dict[str, int] = field(default_factory=dict)
    scheduled_encoder_inputs: dict[str, list[int]] = field(default_factory=dict)
    free_encoder_mm_hashes: list[str] = field(default_factory=list)
    ec_manager_metadata: Any = None


@dataclass
class Window:
    """One request of the input batch: a chunk window ``[start, end)`` and the items
    gathered in it (``positions``: each one's index in the step's gathers)."""

    request_id: str
    start: int
    end: int
    gathers: list[GatherSpec]
    positions: list[int]


def bare_runner(code: VllmCode) -> Any:
    """A ``GPUModelRunner`` without ``__init__``, holding exactly the attributes the
    three methods read (the stand-ins listed in the module docstring)."""
    module = code.module("gpu_model_runner")
    setattr(module, "PIN_MEMORY", False)  # noqa: B010 - the CPU has no pinned memory
    runner = object.__new__(module.GPUModelRunner)
    runner.encoder_cache = {}
    runner.requests = {}
    runner.input_batch = InputBatch()
    runner.model = PassthroughModel()
    runner.device = torch.device("cpu")
    runner.pin_memory = False
    runner.observability_config = None
    runner.lora_config = None
    runner.is_multimodal_pruning_enabled = False
    runner.requires_sequential_video_encoding = False
    runner.encoder_cudagraph_manager = None
    runner.uses_mrope = False
    runner.late_interaction_runner = LateInteractionStandIn()
    return runner


def runner_encodes(
    code: VllmCode, scheduler_output: Any, features: Mapping[str, list[Any]]
) -> set[tuple[str, int]]:
    """The scheduled encoder inputs (request id, input id) vLLM's runner encodes:
    ``_batch_mm_inputs_from_scheduler`` over request states holding the ``mm_features``
    the worker was given when each request was installed (``NewRequestData``), which
    skips an input whose data did not reach the worker (0.33.0's scheduler strips the
    data of items the prefix cache covers when it installs a request)."""
    runner = object.__new__(code.module("gpu_model_runner").GPUModelRunner)
    runner.requests = {
        req_id: RequestState(0, features[req_id])
        for req_id in scheduler_output.scheduled_encoder_inputs
    }
    _hashes, _kwargs, refs = runner._batch_mm_inputs_from_scheduler(scheduler_output)
    kept = {(req_id, id(position)) for req_id, position in refs}
    return {
        (req_id, int(input_id))
        for req_id, input_ids in scheduler_output.scheduled_encoder_inputs.items()
        for input_id in input_ids
        if (req_id, id(features[req_id][input_id].mm_position)) in kept
    }


def _chunk_window(gather: GatherSpec) -> tuple[int, int]:
    placeholder = gather.mm_position
    return placeholder.offset + gather.start_idx, placeholder.offset + gather.end_idx


def _fits(window: Window, gather: GatherSpec) -> bool:
    """Whether ``gather`` joins ``window`` as the next item of one chunk: the items in
    offset order, every item but the window's first gathered from its start and every
    item but its last to its end (what a chunk ``[start, end)`` gives each item)."""
    if gather.request_id != window.request_id:
        return False
    last = window.gathers[-1]
    if last.end_idx != last.mm_position.length or gather.start_idx != 0:
        return False
    return gather.mm_position.offset >= last.mm_position.offset + last.mm_position.length


def windows_of(gathers: Sequence[GatherSpec]) -> list[Window]:
    windows: list[Window] = []
    for index, gather in enumerate(gathers):
        start, end = _chunk_window(gather)
        if windows and _fits(windows[-1], gather):
            windows[-1].end = end
            windows[-1].gathers.append(gather)
            windows[-1].positions.append(index)
        else:
            windows.append(Window(gather.request_id, start, end, [gather], [index]))
    return windows


class VllmWorkerStore:
    """``spec.components.WorkerStore`` over ``GPUModelRunner.encoder_cache``."""

    def __init__(self, code: VllmCode, api: Api) -> None:
        self._code = code
        self._frees_in_method = api.has("runner_free_method")
        self._runner = bare_runner(code)

    # --- the Protocol ----------------------------------------------------------------

    def held_hashes(self) -> frozenset[str]:
        return frozenset(self._runner.encoder_cache)

    def execute_step(self, step: WorkerStep) -> list[NDArray[Any]]:
        outputs = {
            h: torch.tensor(np.array(rows, copy=True)) for h, rows in step.encoder_outputs.items()
        }
        self._free(list(step.freed_mm_hashes))
        self._store(outputs)
        return self._gather(step.gathers)

    def draft_gather(
        self, request_id: str, start: int, new: int, items: Sequence[MultiModalItem]
    ) -> tuple[NDArray[Any], ...]:
        """The drafter's gather, ``_gather_mm_embeddings(scheduler_output,
        shift_computed_tokens=1)``, for one request whose chunk is ``[start, start + new)``
        and whose items are ``items`` (all of them, in offset order, as its
        ``CachedRequestState.mm_features``): vLLM's own choice of what the look-ahead
        reads, skips (0.33.0: an item starting where the chunk ends and not held) or
        misses (0.22.1 asserts)."""
        runner = self._runner
        runner.requests = {
            request_id: RequestState(start, [vllm_feature(self._code, item) for item in items])
        }
        runner.input_batch = InputBatch([request_id])
        with misses_reported():
            embeds, _ = runner._gather_mm_embeddings(
                SchedulerOutputFields(
                    total_num_scheduled_tokens=new, num_scheduled_tokens={request_id: new}
                ),
                shift_computed_tokens=1,
            )
        return tuple(embed.numpy().copy() for embed in embeds)

    def reset_encoder_cache(self) -> None:
        """``GPUModelRunner.reset_encoder_cache``: what the engine core's reset and a
        weight update reach on the worker (``Worker.reset_encoder_cache``)."""
        self._runner.reset_encoder_cache()

    # --- vLLM's three methods --------------------------------------------------------

    def _free(self, mm_hashes: list[str]) -> None:
        if self._frees_in_method:
            self._runner._process_encoder_cache_scheduler_output(
                SchedulerOutputFields(free_encoder_mm_hashes=mm_hashes)
            )
        else:  # 0.22.1: the two lines of GPUModelRunner._update_states
            for mm_hash in mm_hashes:
                self._runner.encoder_cache.pop(mm_hash, None)

    def _store(self, outputs: Mapping[str, torch.Tensor]) -> None:
        if not outputs:
            return
        features = [feature_spec(self._code, h, rows) for h, rows in outputs.items()]
        self._runner.requests = {_ENCODE_REQUEST: RequestState(0, features)}
        self._runner._execute_mm_encoder(
            SchedulerOutputFields(
                scheduled_encoder_inputs={_ENCODE_REQUEST: list(range(len(features)))}
            )
        )

    def _gather(self, gathers: Sequence[GatherSpec]) -> list[NDArray[Any]]:
        windows = windows_of(gathers)
        if not windows:
            return []
        runner = self._runner
        runner.requests = {}
        runner.input_batch = InputBatch()
        scheduled: dict[str, int] = {}
        for number, window in enumerate(windows):
            req_id = f"{window.request_id}#{number}"
            runner.requests[req_id] = RequestState(
                window.start,
                [feature_spec(self._code, g.mm_hash, None, g) for g in window.gathers],
            )
            runner.input_batch.req_ids.append(req_id)
            scheduled[req_id] = window.end - window.start
        with misses_reported():
            embeds, _ = runner._gather_mm_embeddings(
                SchedulerOutputFields(
                    total_num_scheduled_tokens=sum(scheduled.values()),
                    num_scheduled_tokens=scheduled,
                )
            )
        features = [self._runner.requests[f"{w.request_id}#{n}"].mm_features
                    for n, w in enumerate(windows)]
        return per_gather(windows, features, embeds, len(gathers), self._runner.encoder_cache)


def per_gather(
    windows: Sequence[Window],
    features: Sequence[Sequence[Any]],
    embeds: Sequence[torch.Tensor],
    count: int,
    held: Mapping[str, torch.Tensor],
) -> list[NDArray[Any]]:
    """The spec's one result per gather from vLLM's list, which holds one tensor per item
    with rows in its window (by vLLM's own ``get_embeds_indices_in_range``), in order;
    an item whose window selects no row gets an empty array of the held width.
    ``features``: each window's ``MultiModalFeatureSpec``\\ s."""
    results: list[NDArray[Any]] = [np.zeros((0, 0), dtype=np.float32)] * count
    served = iter(embeds)
    for window, window_features in zip(windows, features, strict=True):
        for gather, position, feature in zip(
            window.gathers, window.positions, window_features, strict=True
        ):
            first, end = feature.mm_position.get_embeds_indices_in_range(
                gather.start_idx, gather.end_idx
            )
            if first != end:
                results[position] = next(served).numpy().copy()
            elif (rows := held.get(gather.mm_hash)) is not None:
                results[position] = np.zeros((0, int(rows.shape[-1])), rows.numpy().dtype)
    return results


def feature_spec(
    code: VllmCode, mm_hash: str, rows: torch.Tensor | None, gather: GatherSpec | None = None
) -> Any:
    """A ``MultiModalFeatureSpec`` built by vLLM's constructors: for an encoder output, its
    rows as the one field of the item's ``MultiModalKwargsItem`` (what the passthrough
    model returns); for a gather, no data and the gathered item's placeholder range."""
    inputs = code.module("inputs")
    data = None
    if rows is not None:
        element = inputs.MultiModalFieldElem(data=rows, field=inputs.MultiModalBatchedField())
        data = inputs.MultiModalKwargsItem({_ROWS: element})
    placeholder = (
        vllm_placeholder_range(code, gather.mm_position)
        if gather is not None
        else inputs.PlaceholderRange(offset=0, length=1)
    )
    return inputs.MultiModalFeatureSpec(
        data=data, modality=MODALITY, identifier=mm_hash, mm_position=placeholder
    )

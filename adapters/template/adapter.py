"""Student template: wrap your mini-build behind the adapter contract, then grade it.

1. Copy this file next to your mini-build (say ``my_build/adapter.py``; the folder it
   lies in is importable while grading, so ``from mini_vllm.cache import ...`` works).
2. Fill in the classes below, one method at a time — or make each one a thin wrapper
   around your own class. Every method names the clauses of spec/SPEC.md it is graded
   on; the Protocols in spec/components.py are the exact interfaces.
3. Grade it from the mmspec checkout::

       make grade ADAPTER=my_build/adapter.py
       # or: PYTHONPATH=. python -m properties grade my_build/adapter.py

A class whose methods are all still ``@todo`` is not handed to the grader at all: its
rubric items read "not provided" (0 points), never "failed". A method still marked
``@todo`` raises ``NotImplementedError``, and the items that need it read "not provided"
too. Anything you do not attempt (``is_embed`` masks, chunking, pixel arrays) goes in
``NOT_ATTEMPTED``: those items read "not attempted" instead of a wall of failures.
docs/grading.md explains the report and how to replay a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from numpy.typing import NDArray

from spec.adapter import Adapter, EngineParts
from spec.components import EncoderCacheManager as EncoderCacheManagerProtocol
from spec.components import EngineSnapshot, StepOutput
from spec.types import (
    EncoderBudgetConfig,
    EngineConfig,
    EngineRequest,
    ExpandedPrompt,
    HashInput,
    ImageInput,
    MultiModalItem,
    ProcessorConfig,
    RequestView,
    ScheduleDecision,
    SchedulerConfig,
    WorkerStep,
)

F = TypeVar("F", bound=Callable[..., Any])


def todo(method: F) -> F:
    """Marks a method you have not written yet (delete the decorator when you do)."""
    method.__mmspec_todo__ = True  # type: ignore[attr-defined]
    return method


# --- EXP: placeholder expansion ------------------------------------------------------


class Processor:
    """Built from a ProcessorConfig (its ``policy``: the mini-build's ToyPolicy, or
    fixed / dynamic / tiled / row-break resolution)."""

    def __init__(self, config: ProcessorConfig) -> None:
        self.config = config

    @todo
    def num_image_tokens(self, image: ImageInput) -> int:
        """Placeholder length of ``image`` (toy rule: ``len(image) // 64 + 1``) — EXP-5..10."""
        raise NotImplementedError("Processor.num_image_tokens")

    @todo
    def expand(self, prompt: Sequence[int], images: Sequence[ImageInput]) -> ExpandedPrompt:
        """Replace the i-th ``config.marker_id`` by image i's placeholder ids and record a
        PlaceholderRange per image; raise MarkerCountError / InvalidInputError — EXP-1..5."""
        raise NotImplementedError("Processor.expand")


# --- HASH: content identity ------------------------------------------------------------


class Hasher:
    @todo
    def hash_item(self, data: HashInput, options: Mapping[str, HashInput] | None = None) -> str:
        """A hash of the content (and processor options), never of identity or length:
        e.g. sha256 of an unambiguous serialization — HASH-1..5."""
        raise NotImplementedError("Hasher.hash_item")


# --- ENC: the toy encoder --------------------------------------------------------------


class Encoder:
    """Built from ``hidden_size``. Deterministic, seeded from the content; counts calls."""

    def __init__(self, hidden_size: int) -> None:
        self._hidden_size = hidden_size
        self._num_calls = 0

    @property
    def hidden_size(self) -> int:
        return self._hidden_size

    @property
    def num_calls(self) -> int:
        """Items encoded so far (a batch of k counts k) — ENC-3."""
        return self._num_calls

    @todo
    def encode(self, image: ImageInput, num_embeds: int) -> NDArray[Any]:
        """A (num_embeds, hidden_size) float32 array, a function of the content — ENC-1, ENC-2."""
        raise NotImplementedError("Encoder.encode")

    @todo
    def encode_batch(self, items: Sequence[tuple[ImageInput, int]]) -> list[NDArray[Any]]:
        """The same as encoding each item alone — ENC-4."""
        raise NotImplementedError("Encoder.encode_batch")


# --- ECM: the encoder cache manager -----------------------------------------------------


class EncoderCacheManager:
    """Built from ``cache_size`` (in embeddings). vLLM's cached / freeable / freed trio."""

    def __init__(self, cache_size: int) -> None:
        self._cache_size = cache_size

    @property
    def cache_size(self) -> int:
        return self._cache_size

    @property
    @todo
    def num_free_slots(self) -> int:
        """cache_size minus the sizes of every held entry — ECM-1."""
        raise NotImplementedError("EncoderCacheManager.num_free_slots")

    @property
    @todo
    def num_freeable_slots(self) -> int:
        """num_free_slots plus the sizes of the unreferenced entries — ECM-1."""
        raise NotImplementedError("EncoderCacheManager.num_freeable_slots")

    @property
    @todo
    def cached(self) -> Mapping[str, Any]:
        """mm_hash -> the ids of the requests referencing it (empty: freeable) — ECM-2, ECM-3."""
        raise NotImplementedError("EncoderCacheManager.cached")

    @property
    @todo
    def freeable(self) -> Mapping[str, int]:
        """Unreferenced entries, least recently released first -> size — ECM-2, ECM-5."""
        raise NotImplementedError("EncoderCacheManager.freeable")

    @todo
    def check_and_update_cache(self, request: RequestView, input_id: int) -> bool:
        """True iff held; then the request references it — ECM-3, HASH-6."""
        raise NotImplementedError("EncoderCacheManager.check_and_update_cache")

    @todo
    def can_allocate(
        self,
        request: RequestView,
        input_id: int,
        encoder_compute_budget: int,
        num_embeds_to_schedule: int,
    ) -> bool:
        """Fits the budget and, evicting oldest-released entries as needed, the cache — ECM-4,
        ECM-5."""
        raise NotImplementedError("EncoderCacheManager.can_allocate")

    @todo
    def allocate(self, request: RequestView, input_id: int) -> None:
        """Reserve the item's space and reference it — ECM-1, ECM-3."""
        raise NotImplementedError("EncoderCacheManager.allocate")

    @todo
    def free_encoder_input(self, request: RequestView, input_id: int) -> None:
        """Release one use of one item; the reference lasts until the last use — ECM-6."""
        raise NotImplementedError("EncoderCacheManager.free_encoder_input")

    @todo
    def free(self, request: RequestView) -> None:
        """Release every reference the request holds — ECM-2."""
        raise NotImplementedError("EncoderCacheManager.free")

    @todo
    def get_cached_input_ids(self, request: RequestView) -> set[int]:
        """Every item through which the request holds a reference (it may list other
        items of the request whose hash is held) — ECM-3."""
        raise NotImplementedError("EncoderCacheManager.get_cached_input_ids")

    @todo
    def get_freed_mm_hashes(self) -> list[str]:
        """Drain what was evicted since the last drain (and is not held again) — ECM-7."""
        raise NotImplementedError("EncoderCacheManager.get_freed_mm_hashes")


# --- SPL: the splice -------------------------------------------------------------------


class Splice:
    @todo
    def merge(
        self,
        inputs_embeds: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[Any]:
        """inputs_embeds[is_multimodal] = concat(mm_embeds); on a count mismatch raise
        SpliceCountError('Attempted to assign ... = n multimodal tokens to m placeholders')
        — SPL-1..4."""
        raise NotImplementedError("Splice.merge")

    @todo
    def inject(
        self,
        input_ids: Sequence[int],
        text_embeds: NDArray[Any],
        visual_tokens: Sequence[NDArray[Any]],
        marker_id: int,
    ) -> NDArray[Any]:
        """Replace each marker row by its image's rows (equals expand-then-splice) — SPL-5."""
        raise NotImplementedError("Splice.inject")


# --- SCH: the encoder-scheduling hook ---------------------------------------------------


class SchedulingHook:
    """Built from a SchedulerConfig. vLLM's _try_schedule_encoder_inputs (lab 13-03)."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config

    @todo
    def try_schedule_encoder_inputs(
        self,
        request: RequestView,
        num_computed_tokens: int,
        num_new_tokens: int,
        encoder_compute_budget: int,
        cache: EncoderCacheManagerProtocol,
        shift_computed_tokens: int = 0,
    ) -> ScheduleDecision:
        """Skip, reuse, encode whole, or truncate the chunk at the doorstep — SCH-1..8."""
        raise NotImplementedError("SchedulingHook.try_schedule_encoder_inputs")

    @todo
    def compute_mm_encoder_budget(
        self, config: EncoderBudgetConfig, max_tokens_per_item: Mapping[str, int]
    ) -> tuple[int, int]:
        """(encoder_compute_budget, encoder_cache_size) fitting the worst-case item — SCH-9."""
        raise NotImplementedError("SchedulingHook.compute_mm_encoder_budget")


# --- PFX: prefix caching with pixels ----------------------------------------------------


class BlockHasher:
    """Built from ``block_size``."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size

    @todo
    def block_extra_keys(
        self, items: Sequence[MultiModalItem], start_token_idx: int, end_token_idx: int
    ) -> tuple[tuple[str, int], ...]:
        """(mm_hash, offset - start_token_idx) of every item overlapping the block — PFX-3."""
        raise NotImplementedError("BlockHasher.block_extra_keys")

    @todo
    def request_block_hashes(
        self, token_ids: Sequence[int], items: Sequence[MultiModalItem]
    ) -> list[str]:
        """Chained hashes of the full blocks: (parent, tokens, extra keys) — PFX-1..6."""
        raise NotImplementedError("BlockHasher.request_block_hashes")


# --- WRK: the worker-side embedding store -----------------------------------------------


class WorkerStore:
    @todo
    def execute_step(self, step: WorkerStep) -> list[NDArray[Any]]:
        """Drop the freed hashes, store the outputs, then serve each gather — WRK-1..5."""
        raise NotImplementedError("WorkerStore.execute_step")

    @todo
    def held_hashes(self) -> frozenset[str]:
        """The hashes whose embeddings are held — WRK-2."""
        raise NotImplementedError("WorkerStore.held_hashes")


# --- SYS: the engine loop --------------------------------------------------------------


class EngineLoop:
    """Built from an EngineConfig and the EngineParts it composes (your components
    where you provide them, the reference's elsewhere)."""

    def __init__(self, config: EngineConfig, parts: EngineParts) -> None:
        self.config = config
        self.parts = parts

    @todo
    def add_request(self, request: EngineRequest) -> None:
        """Queue it; AdmissionError if it can never run — SYS-9."""
        raise NotImplementedError("EngineLoop.add_request")

    @todo
    def step(self) -> StepOutput:
        """Schedule, encode, execute and account one step — SYS-1..8, SYS-10."""
        raise NotImplementedError("EngineLoop.step")

    @todo
    def abort(self, request_id: str) -> None:
        """Drop an unfinished request and release what it holds — SYS-7."""
        raise NotImplementedError("EngineLoop.abort")

    @todo
    def preempt(self, request_id: str) -> None:
        """Release a running request's KV blocks and references; back to waiting — SYS-7."""
        raise NotImplementedError("EngineLoop.preempt")

    @todo
    def snapshot(self) -> EngineSnapshot:
        """The observable state between steps."""
        raise NotImplementedError("EngineLoop.snapshot")


# --- the adapter -----------------------------------------------------------------------


def provided(cls: type[Any]) -> type[Any] | None:
    """``cls`` once you have filled in any of its methods; None (not provided) while
    every one is still ``@todo``. The accessors the template writes for you
    (hidden_size, num_calls, cache_size) do not count."""
    filled = [
        name
        for name, value in vars(cls).items()
        if not name.startswith("_")
        and name not in _GIVEN
        and (callable(value) or isinstance(value, property))
        and not _is_todo(value.fget if isinstance(value, property) else value)
    ]
    return cls if filled else None


def _is_todo(member: object) -> bool:
    return bool(getattr(member, "__mmspec_todo__", False))


_GIVEN = frozenset({"hidden_size", "num_calls", "cache_size"})

#: Capabilities you do not attempt (the rubric's [capabilities]): "is_embed",
#: "chunking", "pixel_arrays".
NOT_ATTEMPTED: frozenset[str] = frozenset()

ADAPTER = Adapter(
    name="student-template",  # your name or your build's
    processor=provided(Processor),
    hasher=provided(Hasher),
    encoder=provided(Encoder),
    encoder_cache_manager=provided(EncoderCacheManager),
    splice=provided(Splice),
    scheduling_hook=provided(SchedulingHook),
    block_hasher=provided(BlockHasher),
    worker_store=provided(WorkerStore),
    engine_loop=provided(EngineLoop),
    not_attempted=NOT_ATTEMPTED,
)

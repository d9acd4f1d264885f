"""The typed interfaces every implementation is held to (DESIGN.md section 4).

One ``Protocol`` per component. Method names and argument order follow vLLM v0.22.1
where it has the component, so that the vLLM adapter is a thin shim. The adapter
loader checks an implementation against these Protocols (method present, arity right)
before any property runs.

The docstrings state behaviour in terms of clause ids of ``spec/SPEC.md``; the
clauses are the authority.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from numpy.typing import NDArray

from spec.types import (
    EncoderBudgetConfig,
    EngineRequest,
    ExpandedPrompt,
    HashInput,
    ImageInput,
    MultiModalItem,
    RequestView,
    ScheduleDecision,
    WorkerStep,
)


@runtime_checkable
class Processor(Protocol):
    """Placeholder expansion (EXP). Built from a ``ProcessorConfig``."""

    def num_image_tokens(self, image: ImageInput) -> int:
        """Placeholder length of ``image`` under the configured policy (EXP-6..10)."""
        ...

    def expand(self, prompt: Sequence[int], images: Sequence[ImageInput]) -> ExpandedPrompt:
        """Replace the i-th marker by the i-th image's placeholder tokens and record its
        ``PlaceholderRange`` (EXP-1..5). Raises ``MarkerCountError`` when the counts
        differ and ``InvalidInputError`` for malformed input."""
        ...


@runtime_checkable
class Hasher(Protocol):
    """Content identity (HASH). ``mm_hash`` depends on content and options only."""

    def hash_item(self, data: HashInput, options: Mapping[str, HashInput] | None = None) -> str:
        """Hash of ``data`` together with the processor ``options`` that change the
        encoder output or the token count (HASH-1..4)."""
        ...


@runtime_checkable
class Encoder(Protocol):
    """The toy encoder (ENC): deterministic, seeded from the content, counts calls.
    Built from ``hidden_size``."""

    @property
    def hidden_size(self) -> int: ...

    @property
    def num_calls(self) -> int:
        """How many items have been encoded since construction (a batch of k counts k)."""
        ...

    def encode(self, image: ImageInput, num_embeds: int) -> NDArray[Any]:
        """A ``(num_embeds, hidden_size)`` float32 array, a pure function of the
        image's content and ``num_embeds`` (ENC-1..3)."""
        ...

    def encode_batch(self, items: Sequence[tuple[ImageInput, int]]) -> list[NDArray[Any]]:
        """Encode several items at once; equal to encoding each alone (ENC-4)."""
        ...


@runtime_checkable
class EncoderCacheManager(Protocol):
    """Scheduler-side bookkeeping of encoder outputs (ECM), vLLM's
    ``EncoderCacheManager``. Units are embeddings. Built from ``cache_size``.

    Observable state: ``cached`` (mm_hash -> ids of the requests referencing it; an
    empty set means unreferenced but still held), ``freeable`` (unreferenced entries,
    least recently released first, with their sizes), ``num_free_slots``,
    ``num_freeable_slots``. A request's reference to a hash covers every item of that
    request with that hash and lasts until each of them has been released (ECM-6).
    """

    @property
    def cache_size(self) -> int: ...

    @property
    def num_free_slots(self) -> int: ...

    @property
    def num_freeable_slots(self) -> int: ...

    @property
    def cached(self) -> Mapping[str, Any]:
        """mm_hash -> collection of request ids referencing it."""
        ...

    @property
    def freeable(self) -> Mapping[str, int]:
        """Unreferenced entries in eviction order (oldest release first) -> size."""
        ...

    def check_and_update_cache(self, request: RequestView, input_id: int) -> bool:
        """True iff the item's output is held; then the request takes a reference.
        Raises ``EmbedCountMismatchError`` if the held entry has another size (HASH-5)."""
        ...

    def can_allocate(
        self,
        request: RequestView,
        input_id: int,
        encoder_compute_budget: int,
        num_embeds_to_schedule: int,
    ) -> bool:
        """Whether the item fits the budget and, together with
        ``num_embeds_to_schedule`` already planned, the cache; evicts least recently
        released unreferenced entries as needed when it returns True (ECM-4, ECM-5)."""
        ...

    def allocate(self, request: RequestView, input_id: int) -> None:
        """Reserve space for the item's output and reference it (after ``can_allocate``)."""
        ...

    def free_encoder_input(self, request: RequestView, input_id: int) -> None:
        """Release the request's use of one item (ECM-6)."""
        ...

    def free(self, request: RequestView) -> None:
        """Release every reference the request holds (finish, abort, preemption)."""
        ...

    def get_cached_input_ids(self, request: RequestView) -> set[int]:
        """The request's items whose references it currently holds."""
        ...

    def get_freed_mm_hashes(self) -> list[str]:
        """Drain the hashes evicted since the last drain that are not held now, each
        once (ECM-7)."""
        ...


@runtime_checkable
class Splice(Protocol):
    """The splice (SPL): ``inputs_embeds[is_multimodal] = concat(mm_embeds)``."""

    def merge(
        self,
        inputs_embeds: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[Any]:
        """Return ``inputs_embeds`` with the masked rows replaced, in order, by the rows
        of ``mm_embeds`` (cast to its dtype). Raises ``SpliceCountError`` on a count
        mismatch, never broadcasting (SPL-1..4)."""
        ...

    def inject(
        self,
        input_ids: Sequence[int],
        text_embeds: NDArray[Any],
        visual_tokens: Sequence[NDArray[Any]],
        marker_id: int,
    ) -> NDArray[Any]:
        """The seed article's injection: each marker row replaced by its image's rows
        (SPL-5: equals expand-then-splice). Raises ``MarkerCountError``."""
        ...


@runtime_checkable
class SchedulingHook(Protocol):
    """The encoder-scheduling hook (SCH), vLLM's
    ``Scheduler._try_schedule_encoder_inputs``. Built from a ``SchedulerConfig``."""

    def try_schedule_encoder_inputs(
        self,
        request: RequestView,
        num_computed_tokens: int,
        num_new_tokens: int,
        encoder_compute_budget: int,
        cache: EncoderCacheManager,
        shift_computed_tokens: int = 0,
    ) -> ScheduleDecision:
        """Decide which items to encode this step and truncate the chunk (SCH-1..8)."""
        ...

    def compute_mm_encoder_budget(
        self, config: EncoderBudgetConfig, max_tokens_per_item: Mapping[str, int]
    ) -> tuple[int, int]:
        """``(encoder_compute_budget, encoder_cache_size)`` sized so that the worst-case
        item always fits; raises ``BudgetConfigError`` when it never can (SCH-9)."""
        ...


@runtime_checkable
class BlockHasher(Protocol):
    """Prefix-cache block hashing with multimodal extra keys (PFX). Built from
    ``block_size``."""

    def block_extra_keys(
        self, items: Sequence[MultiModalItem], start_token_idx: int, end_token_idx: int
    ) -> tuple[tuple[str, int], ...]:
        """``(mm_hash, offset - start_token_idx)`` for every item overlapping the block."""
        ...

    def request_block_hashes(
        self, token_ids: Sequence[int], items: Sequence[MultiModalItem]
    ) -> list[str]:
        """Chained hashes of the full blocks of a prompt (PFX-1..4)."""
        ...


@runtime_checkable
class WorkerStore(Protocol):
    """The worker-side embedding store (SYS): tensors keyed by ``mm_hash``."""

    def execute_step(self, step: WorkerStep) -> list[NDArray[Any]]:
        """Drop the freed hashes, store the step's encoder outputs, then return the
        embedding rows each gather needs, in order (SYS-1)."""
        ...

    def held_hashes(self) -> frozenset[str]: ...


@dataclass(frozen=True)
class ScheduledChunk:
    """One request's share of one engine step."""

    request_id: str
    num_computed_tokens: int
    num_new_tokens: int
    encoder_inputs: tuple[int, ...]
    gathered: tuple[NDArray[Any], ...]


@dataclass(frozen=True)
class StepOutput:
    """What one engine step did."""

    chunks: tuple[ScheduledChunk, ...]
    encoded_mm_hashes: tuple[str, ...]
    freed_mm_hashes: tuple[str, ...]
    preempted: tuple[str, ...]
    finished: tuple[str, ...]


@runtime_checkable
class EngineLoop(Protocol):
    """The step simulator that composes the components (SYS). Built from an
    ``EngineConfig`` and the components to compose."""

    def add_request(self, request: EngineRequest) -> None:
        """Admit a request; raises ``AdmissionError`` if it can never run (SYS-9)."""
        ...

    def step(self) -> StepOutput: ...

    def abort(self, request_id: str) -> None: ...

    def preempt(self, request_id: str) -> None: ...

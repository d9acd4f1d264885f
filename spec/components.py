"""The typed interfaces every implementation is held to (spec/SPEC.md names the clauses;
spec/adapter.py the contract that bundles them).

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
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from numpy.typing import NDArray

from spec.types import (
    EncoderBudgetConfig,
    EngineRequest,
    ExpandedPrompt,
    HashInput,
    ImageInput,
    MultiModalItem,
    PrefixIdentity,
    ProcessedFeature,
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
class RequestIdentifiedHasher(Protocol):
    """Optional capability of a ``Hasher`` (HASH-7, HASH-8): the identifier of an item
    whose request may supply one (vLLM's ``multi_modal_uuids``, the chat API's per-part
    ``uuid``), as ``ProcessorInputs.get_mm_hashes`` computes it. Without it those
    clauses are "not provided"."""

    def item_identifier(
        self,
        data: HashInput | None,
        options: Mapping[str, HashInput] | None,
        uuid: str | None,
    ) -> str:
        """``hash_item(data, options)`` when ``uuid`` is None; otherwise an identifier of
        the request-supplied ``uuid`` and the options, whatever ``data`` is (a request
        may omit the data of an item whose uuid the engine holds: ``data=None``)."""
        ...


@runtime_checkable
class FeatureHasher(Protocol):
    """The identity of an item computed from its processor output (HASH-9, HASH-10), for
    an engine that keys items by their processed features rather than by ``(data,
    options)``: SGLang's ``MultimodalDataItem.set_pad_value`` → ``hash_feature``, whose
    hash becomes the item's pad values (the radix key) and its embedding-cache key. An
    optional component: without it both clauses are "not provided"."""

    def feature_identity(self, feature: ProcessedFeature) -> str:
        """The identity of ``feature`` (one array, or a list of arrays): equal for equal
        features (HASH-9), different for different ones (HASH-10)."""
        ...


@runtime_checkable
class ClientHashedFeatureHasher(Protocol):
    """Optional capability of a ``FeatureHasher`` (HASH-11): the identity of an item whose
    request may carry its hash (SGLang 0.5.22+: a ``processor_output`` item's ``hash``
    field, reused by ``set_pad_value``). Without it HASH-11 is "not provided"."""

    def feature_identifier(self, feature: ProcessedFeature, client_hash: str | None) -> str:
        """``feature_identity(feature)`` when ``client_hash`` is None; otherwise the
        identity the engine gives the item when its request says its hash is
        ``client_hash`` (written as ``feature_identity`` writes identities)."""
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
    ``num_freeable_slots``. A request references a hash through each of its items that
    took a reference (a hit in ``check_and_update_cache``, or ``allocate``) — not
    through its other items with that hash — and stops referencing it when every item
    that took one has been released (ECM-6).

    Optional capabilities (an implementation need not provide them; the clause that
    needs one is reported "not provided" without it, and nothing else changes):
    ``reset()`` (:class:`ResettableEncoderCache`, ECM-9) and ``tracked_request_ids()`` with
    ``tracked_mm_hashes()`` (:class:`EncoderCacheBookkeeping`, ECM-8). A capability is
    provided when the attribute is callable on an instance (an adapter may set it to
    None where the wrapped code lacks it).
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
        """True iff the item's output is held; then the request takes a reference through
        this item only, not through its other items with that hash (ECM-6). Raises
        ``EmbedCountMismatchError`` if the held entry has another size (HASH-6)."""
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
        """Every item through which the request currently references a hash; it may
        list other items of the request whose hash is held, never an item whose hash is
        not held (ECM-3)."""
        ...

    def get_freed_mm_hashes(self) -> list[str]:
        """Drain every hash evicted since the last drain that is not held now, and
        nothing else; a hash evicted twice between drains may be listed twice, as every
        consumer drops idempotently (ECM-7)."""
        ...


@runtime_checkable
class ResettableEncoderCache(Protocol):
    """Optional capability of an ``EncoderCacheManager`` (ECM-9) and of an
    ``EncoderDecoderCacheManager`` (ECD-6): vLLM's ``reset``, which
    ``Scheduler.reset_encoder_cache`` calls when model weights change."""

    def reset(self) -> None:
        """Forget every entry, reference and allocation: every slot free; afterwards the
        manager behaves as a fresh one of the same size."""
        ...


@runtime_checkable
class EncoderDecoderCacheManager(Protocol):
    """The encoder-decoder cache manager (ECD), vLLM's ``EncoderDecoderCacheManager``:
    the scheduler-side budget of the encoder outputs of a cross-attention model
    (Whisper), each computed at its request's first step, consumed in that step (into
    the cross-attention KV) and dropped by the worker one step later. Units are
    embeddings. Built from ``cache_size``.

    A component of its own, not :class:`EncoderCacheManager` with a capability flag:
    nothing is shared or kept, so the observable state ECM judges (``cached``,
    ``freeable``, ``num_freeable_slots``) does not exist — vLLM's subclass never sets
    it; what the worker is told to drop follows the step, not eviction (ECD-5 against
    ECM-7); and an engine has both — vLLM's ``Scheduler`` picks one per model
    (``model_config.is_encoder_decoder``) — so one adapter provides both factories, and
    an adapter without this one reports ECD "not provided". The methods are
    ``EncoderCacheManager``'s, which the scheduler calls on either.

    Observable state: ``num_free_slots`` (the cache size less the embeddings of the
    allocations not yet released, ECD-1). An *allocation* is one ``allocate(r, i)``; it
    is the request's own, whatever hash it carries (ECD-3).

    Optional capability: ``reset()`` (:class:`ResettableEncoderCache`, ECD-6); without it
    ECD-6 is "not provided".
    """

    @property
    def cache_size(self) -> int: ...

    @property
    def num_free_slots(self) -> int: ...

    def check_and_update_cache(self, request: RequestView, input_id: int) -> bool:
        """Always False, and changes nothing: encoder outputs are never shared (ECD-3)."""
        ...

    def can_allocate(
        self,
        request: RequestView,
        input_id: int,
        encoder_compute_budget: int,
        num_embeds_to_schedule: int,
    ) -> bool:
        """Whether the item fits the budget and, with ``num_embeds_to_schedule`` already
        planned, the free slots; changes nothing (ECD-4)."""
        ...

    def allocate(self, request: RequestView, input_id: int) -> None:
        """Charge the item's embeddings to the request (after ``can_allocate``, ECD-1)."""
        ...

    def free_encoder_input(self, request: RequestView, input_id: int) -> None:
        """Release the request's allocation of the item if it holds one not yet
        released; otherwise nothing (ECD-2)."""
        ...

    def free(self, request: RequestView) -> None:
        """Release every allocation the request holds (finish, abort, preemption)."""
        ...

    def get_cached_input_ids(self, request: RequestView) -> set[int]:
        """The request's items holding an unreleased allocation (others may be listed:
        releasing them changes nothing, ECD-2)."""
        ...

    def get_freed_mm_hashes(self) -> list[str]:
        """Drain, once per step after its allocations: every hash allocated in the step
        before this one (ECD-5)."""
        ...


@runtime_checkable
class EncoderCacheBookkeeping(Protocol):
    """Optional capability of an ``EncoderCacheManager`` (ECM-8): what it keeps besides
    its observable state, so that a leak (state kept for a request that references
    nothing, or for an evicted entry) can be seen."""

    def tracked_request_ids(self) -> frozenset[str]:
        """Every request id the manager keeps any state for (references, per-request
        item sets or counts)."""
        ...

    def tracked_mm_hashes(self) -> frozenset[str]:
        """Every ``mm_hash`` the manager keeps any per-entry state for (its size, its
        referencing requests, its place in ``freeable``) -- not the list of hashes
        evicted since the last drain, which ECM-7 reports."""
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


@runtime_checkable
class InjectingSplice(Protocol):
    """Optional capability of a ``Splice`` (SPL-5, DIFF-2): the seed article's
    marker-injection path, beside expand-then-splice. An engine whose processor expands
    each image's placeholders before the splice has no such path (SGLang); without it
    those clauses are "not provided"."""

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
class Bfloat16Splice(Protocol):
    """Optional (DIFF-1..3): a splice that also computes in bfloat16, bit patterns in and
    out (numpy has no bfloat16). Found by duck typing; the torch adapter has it."""

    def merge_bfloat16(
        self,
        inputs_bits: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[Any]:
        """``merge`` with ``inputs_bits`` and the result as ``uint16`` bfloat16 bit
        patterns; ``mm_embeds`` are float arrays, rounded to bfloat16."""
        ...

    def inject_bfloat16(
        self,
        input_ids: Sequence[int],
        text_bits: NDArray[Any],
        visual_tokens: Sequence[NDArray[Any]],
        marker_id: int,
    ) -> NDArray[Any]:
        """``inject`` in bfloat16, bit patterns in and out."""
        ...


@runtime_checkable
class MultiPrecisionEncoder(Protocol):
    """Optional (DIFF-4): an encoder that computes in several precisions (results as
    float32 arrays holding that precision's values) and says on which kind of device.
    Found by duck typing; the torch adapter has it."""

    @property
    def device_type(self) -> str:
        """``cpu`` (batch invariance is bitwise) or an accelerator (``cuda``)."""
        ...

    @property
    def precisions(self) -> tuple[str, ...]: ...

    def encode_batch_as(
        self, items: Sequence[tuple[ImageInput, int]], precision: str
    ) -> list[NDArray[Any]]: ...


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

    def request_block_hashes(
        self, token_ids: Sequence[int], items: Sequence[MultiModalItem]
    ) -> list[str]:
        """Chained hashes of the full blocks of a prompt (PFX-1..6)."""
        ...


@runtime_checkable
class BlockExtraKeys(Protocol):
    """Optional capability of a ``BlockHasher`` (PFX-3): the per-block extra keys
    themselves, which consumers of per-block keys (KV transfer, offloading) read. An
    engine that puts an item's identity into the token ids instead (SGLang's pad values)
    has none; without it PFX-3 is "not provided", and the hashes (PFX-1, PFX-2, PFX-4..6)
    are judged all the same."""

    def block_extra_keys(
        self, items: Sequence[MultiModalItem], start_token_idx: int, end_token_idx: int
    ) -> tuple[tuple[str, int], ...]:
        """``(mm_hash, offset - start_token_idx)`` for every item overlapping the block."""
        ...


@runtime_checkable
class IdentityBlockHasher(Protocol):
    """Optional capability of a ``BlockHasher`` (PFX-7, PFX-8): block hashes of a prompt
    that carries, besides tokens and items, the other kinds of identity a prefix-cache
    key folds in (vLLM's ``generate_block_hash_extra_keys``: the LoRA adapter, the
    ``cache_salt``, prompt embeddings). Without it those clauses are "not provided"."""

    def request_block_hashes_with(
        self,
        token_ids: Sequence[int],
        items: Sequence[MultiModalItem],
        identity: PrefixIdentity,
    ) -> list[str]:
        """Chained hashes of the full blocks of a prompt with ``identity``; with
        ``PrefixIdentity()`` exactly ``request_block_hashes(token_ids, items)``. With
        prompt embeddings there is one row per token id."""
        ...


#: The kinds of identity a ``PrefixIdentity`` carries, by field name.
IDENTITY_KINDS = ("lora", "cache_salt", "prompt_embeds")


@runtime_checkable
class KindLimitedIdentityBlockHasher(Protocol):
    """Optional, beside ``IdentityBlockHasher`` (PFX-7): the kinds of identity (of
    :data:`IDENTITY_KINDS`) whose requests the engine's prefix cache serves at all. An
    engine that refuses a kind while prefix caching is on — SGLang refuses
    ``input_embeds`` unless its radix cache is disabled — keys no block of such a
    request, so PFX-7 draws only the kinds listed. Without it: every kind."""

    def identity_kinds(self) -> tuple[str, ...]: ...


@runtime_checkable
class ItemCache(Protocol):
    """The front-end item cache (FIC): the API process's sender half and the engine
    core's receiver half of vLLM's multimodal processor cache, built from one capacity in
    bytes (an item weighs its payload's length). Each request's items pass ``send`` and
    then ``receive``; a request dropped between the two passes ``send`` only, and one
    that waits in the engine may pass ``receive`` after a ``clear`` and other requests
    (FIC-4)."""

    def send(self, items: list[tuple[str, bytes]]) -> list[bytes | None]:
        """The sender: per item, its payload, or None when the engine holds its key (the
        data is left out of the request) (FIC-1, FIC-3)."""
        ...

    def receive(self, items: list[tuple[str, bytes | None]]) -> list[bytes]:
        """The receiver: per item, the payload sent, or for an omitted one the payload
        held under its key; ``ItemCacheMissError`` when an omitted item is not held
        (FIC-1, FIC-2)."""
        ...

    def invalidate(self, key: str) -> None:
        """The sender forgets ``key`` (the engine reported it missing) (FIC-3)."""
        ...

    def clear(self) -> None:
        """Both halves empty (the engine's ``reset_mm_cache``)."""
        ...


@runtime_checkable
class EmbeddingCache(Protocol):
    """A content-keyed embedding cache without references (EMB): the encoder outputs of
    items (or of a request's items together) kept under their identity, in a budget of
    bytes, least recently used first out — SGLang's ``MultiModalStaticCache`` (0.5.22,
    0.5.23) and ``MultiModalCache`` (0.5.3). Built from its capacity in bytes; an
    embedding weighs its ``nbytes``. An optional component: without it EMB is "not
    provided"."""

    def put(self, key: str, embedding: NDArray[Any]) -> bool:
        """Keep ``embedding`` under ``key``, evicting least recently used entries as
        needed; True when ``key`` is held afterwards (a key already held is refreshed and
        keeps its entry), False for an embedding larger than the capacity, which evicts
        nothing (EMB-2)."""
        ...

    def get(self, key: str) -> NDArray[Any] | None:
        """The embedding held under ``key`` (a use: it becomes the most recently used),
        or None when ``key`` is not held (EMB-1)."""
        ...

    def held(self) -> Mapping[str, int]:
        """Every key held and the bytes its entry is charged, least recently used first
        (EMB-2)."""
        ...


@runtime_checkable
class WorkerStore(Protocol):
    """The worker-side embedding store (WRK): tensors keyed by ``mm_hash``."""

    def execute_step(self, step: WorkerStep) -> list[NDArray[Any]]:
        """Drop the freed hashes, store the step's encoder outputs, then return the
        embedding rows each gather needs, in order (WRK-1..5)."""
        ...

    def held_hashes(self) -> frozenset[str]: ...


@runtime_checkable
class SelfManagedWorkerStore(Protocol):
    """Optional declaration of a ``WorkerStore`` whose embeddings a content-keyed cache of
    its own keeps, not the scheduler's instructions: the worker of an engine without a
    scheduler-side encoder cache (SGLang's ``mm_schedule`` looks each item up in
    ``MultiModalStaticCache`` and encodes what it misses). It has no frees to apply
    first, no held set the scheduler mirrors and no miss to report, so WRK-1, WRK-2 and
    WRK-5 are "not provided" for it; its gathers are judged (WRK-3, WRK-4), and its cache
    by EMB where the adapter provides one."""

    def self_managed(self) -> bool:
        """True (a store whose ``self_managed()`` is not True is judged as any other)."""
        ...


#: Where the KV of one computed prompt or output position came from (SYS-6):
#: ``("token", token_id)`` for a position computed from a token (text, break and end
#: tokens, and generated tokens), ``("embed", mm_hash, row)`` for a position computed from
#: embedding row ``row`` of the item whose content hash is ``mm_hash``.
KVSource: TypeAlias = tuple[str, int] | tuple[str, str, int]


@dataclass(frozen=True)
class ScheduledChunk:
    """One request's share of one engine step: prompt (or output) positions
    ``[num_computed_tokens, num_computed_tokens + num_new_tokens)``.

    ``encoder_inputs``: the request's items encoded this step for this chunk.
    ``gathered``: the embedding rows the worker served for the chunk, one array per item
    whose placeholder positions in the window include at least one ``is_embed``
    position, in offset order (``get_embeds_indices_in_range`` of the window).
    """

    request_id: str
    num_computed_tokens: int
    num_new_tokens: int
    encoder_inputs: tuple[int, ...]
    gathered: tuple[NDArray[Any], ...]
    #: with a drafter (SYS-13): the rows its gather served over ``[c + 1, c + n + 1)``,
    #: one array per item with an ``is_embed`` position there, in offset order — an item
    #: starting at ``c + n`` left out where the worker does not hold it (token
    #: embeddings stand in: the drafter's fallback)
    draft_gathered: tuple[NDArray[Any], ...] = ()
    #: with a drafter (SYS-14): the chunk's last ``num_draft_tokens`` positions are the
    #: drafter's proposals, verified by the target this step; they follow the request's
    #: ``P + g`` tokens, so the chunk's own part ``[c, c + n − d)`` ends at ``P + g``
    num_draft_tokens: int = 0
    #: how many of the drafts the target accepted (a prefix of them): the step samples
    #: ``1 + num_accepted_drafts`` tokens (fewer if the request reaches
    #: ``max_new_tokens``) and ``num_computed_tokens`` becomes ``c + n − d + a``
    num_accepted_drafts: int = 0


@dataclass(frozen=True)
class StepOutput:
    """What one engine step did. ``chunks`` are in scheduling order (running requests
    first, then admitted waiting ones); ``freed_mm_hashes`` is what the scheduler told
    the worker to drop (drained once per step, after scheduling); ``preempted`` lists
    the requests this step preempted for KV space; ``finished`` those that generated
    their last token in this step (their resources are released)."""

    chunks: tuple[ScheduledChunk, ...]
    encoded_mm_hashes: tuple[str, ...]
    freed_mm_hashes: tuple[str, ...]
    preempted: tuple[str, ...]
    finished: tuple[str, ...]
    #: with async scheduling (SYS-15) the fields above describe the step *executed*
    #: in this call (``preempted``: those preempted while scheduling the next one), and
    #: these the step scheduled in this call, left in flight: its chunks (no rows yet),
    #: the hashes it will encode and the hashes it will tell the worker to drop
    in_flight: tuple[ScheduledChunk, ...] = ()
    in_flight_encoded_mm_hashes: tuple[str, ...] = ()
    in_flight_freed_mm_hashes: tuple[str, ...] = ()


@dataclass(frozen=True)
class RequestSnapshot:
    """One unfinished request as the engine holds it between steps.

    ``status``: ``"running"`` once scheduled, ``"waiting"`` before that and after a
    preemption. ``kv_sources`` has one entry per computed position (read from the KV
    blocks, so a prefix hit shows what the shared blocks were computed from)."""

    request_id: str
    status: Literal["waiting", "running"]
    num_computed_tokens: int
    output_token_ids: tuple[int, ...]
    kv_block_ids: tuple[int, ...]
    kv_sources: tuple[KVSource, ...]
    #: the weights version each computed position's KV was computed at, one per
    #: position (SYS-12); ``()`` for an engine without ``update_weights`` (version 0)
    kv_weights_versions: tuple[int, ...] = ()
    #: with async scheduling (SYS-15): how many of the last ``num_computed_tokens``
    #: positions wait for the step in flight to compute their KV — the request's chunk
    #: in flight, and a prefix hit on blocks another request's chunk in flight computes;
    #: ``kv_sources`` covers the others
    num_in_flight_tokens: int = 0


@dataclass(frozen=True)
class EngineSnapshot:
    """The engine's observable state between steps (what the SYS invariants read).

    ``encoder_cache_refs``: every hash the cache manager holds -> the ids of the
    requests referencing it (empty: freeable). ``worker_held``: the hashes whose
    embeddings the worker holds. ``num_kv_blocks_in_use``: KV blocks referenced by some
    request (cached but unreferenced blocks are free). ``encoder_num_calls``: the
    encoder's ``num_calls``."""

    requests: Mapping[str, RequestSnapshot]
    num_kv_blocks_in_use: int
    encoder_cache_refs: Mapping[str, frozenset[str]]
    encoder_cache_free_slots: int
    worker_held: frozenset[str]
    encoder_num_calls: int


@runtime_checkable
class EngineLoop(Protocol):
    """The step simulator that composes the components (SYS). Built from an
    ``EngineConfig`` and ``EngineParts`` (the cache manager, scheduling hook, block
    hasher, worker store, encoder and hasher it composes)."""

    def add_request(self, request: EngineRequest) -> None:
        """Queue a request; raises ``AdmissionError`` if it can never run (SYS-9)."""
        ...

    def step(self) -> StepOutput:
        """Schedule, encode, execute and account one step (SYS-1..8, SYS-10)."""
        ...

    def abort(self, request_id: str) -> None:
        """Drop an unfinished request and release everything it holds (SYS-7); raises
        ``UnknownRequestError`` for an id that is not unfinished."""
        ...

    def preempt(self, request_id: str) -> None:
        """Preempt a running request (release its KV blocks and encoder references,
        reset it to waiting with no computed tokens, SYS-7; it keeps its generated
        tokens and recomputes them with its prompt when it resumes, SYS-10); a waiting
        request is left as it is; raises ``UnknownRequestError`` for an id that is not
        unfinished."""
        ...

    def snapshot(self) -> EngineSnapshot:
        """The observable state between steps."""
        ...


@runtime_checkable
class SpeculativeEngine(Protocol):
    """Optional capability of an ``EngineLoop`` (SYS-13): it runs the EAGLE-style
    drafter its ``EngineConfig.num_speculative_tokens`` asks for."""

    def num_speculative_tokens(self) -> int:
        """The ``k`` this engine's drafter runs with (0: none)."""
        ...


@runtime_checkable
class AsyncEngine(Protocol):
    """Optional capability of an ``EngineLoop`` (SYS-15): it schedules one step ahead
    of the worker when its ``EngineConfig.async_scheduling`` asks for it."""

    def async_scheduling(self) -> bool:
        """Whether this engine runs with async scheduling."""
        ...


@runtime_checkable
class HybridEngine(Protocol):
    """Optional capability of an ``EngineLoop`` (SYS-16): it serves a hybrid model whose
    recurrent state is cached per KV block when its ``EngineConfig.mamba_block_aligned``
    asks for it (vLLM's ``mamba_cache_mode="align"``)."""

    def mamba_block_aligned(self) -> bool:
        """Whether this engine aligns its chunks to the recurrent state's blocks."""
        ...


@runtime_checkable
class ResettableEngine(Protocol):
    """Optional capability of an ``EngineLoop`` (SYS-11): the cache resets vLLM's engine
    core offers between steps (``EngineCore.reset_encoder_cache``,
    ``EngineCore.reset_prefix_cache``), which RL frameworks call around a weight sync.
    Provided when both attributes are callable on an instance."""

    def reset_encoder_cache(self) -> None:
        """Forget every encoder output, in the cache manager and in the worker."""
        ...

    def reset_prefix_cache(self) -> bool:
        """Make every KV block computed so far unfindable by a prefix hit; ``False``
        (nothing changed) where blocks are in use and the engine cannot."""
        ...


@runtime_checkable
class WeightUpdatableEngine(Protocol):
    """Optional capability of an ``EngineLoop`` (SYS-12): load new model weights while
    requests are in flight (weights version ``v`` becomes ``v + 1``; see
    :func:`spec.weights.rows_at_weights_version`), as vLLM does with
    ``pause_generation(mode="keep", clear_cache=True)``, the weight transfer and
    ``resume_generation``."""

    def update_weights(self) -> None:
        """Switch to the next weights version between steps."""
        ...

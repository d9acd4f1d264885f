"""Shared dataclasses: the vocabulary every implementation and property speaks.

Names follow vLLM (``PlaceholderRange``, ``mm_hash``, ``num_embeds``,
``encoder_compute_budget``) so that adapters for the real engine stay thin. These are
plain values: frozen, validated on construction, with no behaviour beyond arithmetic that
*defines* a term of the specification (``get_num_embeds``,
``get_embeds_indices_in_range``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, Union

import numpy as np
from numpy.typing import NDArray

from spec.errors import InvalidInputError, InvalidRangeError

#: An image as the processor, hasher and encoder receive it: raw encoded bytes (the
#: mini-build's fake images) or a pixel array of shape (height, width[, channels]).
ImageInput: TypeAlias = Union[bytes, NDArray[Any]]

#: What the hasher accepts: images, scalars, and nested lists/tuples/dicts of them.
HashInput: TypeAlias = Union[
    bytes,
    str,
    int,
    float,
    bool,
    None,
    NDArray[Any],
    Sequence["HashInput"],
    Mapping[str, "HashInput"],
]

#: An item's processor output, what an engine that keys items by their processed
#: features hashes (SGLang's ``MultimodalDataItem.feature``): one array, or a list of
#: arrays (tiles, slices, images of one item) whose boundaries are part of it.
ProcessedFeature: TypeAlias = Union[NDArray[Any], Sequence[NDArray[Any]]]

#: Embeddings: a float array of shape (rows, hidden_size).
Embeddings: TypeAlias = NDArray[Any]


def _require_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidInputError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise InvalidInputError(f"{name} must be >= {minimum}, got {value}")


@dataclass(frozen=True)
class PlaceholderRange:
    """Where one multimodal item sits in the expanded prompt (vLLM
    ``vllm/multimodal/inputs.py::PlaceholderRange``).

    Positions ``[offset, offset + length)`` are placeholders. ``is_embed``, when given,
    says which of them receive an embedding row (Pixtral-style row-break tokens inside
    the range do not); ``None`` means every position does.
    """

    offset: int
    length: int
    is_embed: tuple[bool, ...] | None = None

    def __post_init__(self) -> None:
        try:
            _require_int("PlaceholderRange.offset", self.offset, 0)
            _require_int("PlaceholderRange.length", self.length, 1)
        except InvalidInputError as e:
            raise InvalidRangeError(str(e)) from None
        if self.is_embed is not None:
            if not isinstance(self.is_embed, tuple) or not all(
                isinstance(b, bool) for b in self.is_embed
            ):
                raise InvalidRangeError("PlaceholderRange.is_embed must be a tuple of bools")
            if len(self.is_embed) != self.length:
                raise InvalidRangeError(
                    f"PlaceholderRange.is_embed has {len(self.is_embed)} entries "
                    f"for a range of length {self.length}"
                )

    @property
    def end(self) -> int:
        """One past the last position of the range."""
        return self.offset + self.length

    def get_num_embeds(self) -> int:
        """How many embedding rows the encoder must produce: popcount of ``is_embed``."""
        if self.is_embed is None:
            return self.length
        return sum(self.is_embed)

    def get_embeds_indices_in_range(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        """Embedding rows ``[a, b)`` that serve placeholder positions
        ``[start_idx, end_idx)`` (relative to ``offset``). Requires
        ``0 <= start_idx <= end_idx <= length``."""
        if not (0 <= start_idx <= end_idx <= self.length):
            raise InvalidRangeError(
                f"embeds window [{start_idx}, {end_idx}) is not inside [0, {self.length})"
            )
        if self.is_embed is None:
            return start_idx, end_idx
        return sum(self.is_embed[:start_idx]), sum(self.is_embed[:end_idx])


@dataclass(frozen=True)
class MultiModalItem:
    """One multimodal item of a request (vLLM ``MultiModalFeatureSpec``): its content
    identity and where its placeholders are."""

    mm_hash: str
    mm_position: PlaceholderRange

    @property
    def num_embeds(self) -> int:
        return self.mm_position.get_num_embeds()


@dataclass(frozen=True)
class LoraAdapter:
    """The LoRA adapter a request runs with (vLLM ``LoRARequest``): the name a client
    asks for and the weights it names. A name can be unloaded and loaded again from
    other weights, so the two together say which weights computed a block's KV (PFX-7)."""

    name: str
    path: str

    def __post_init__(self) -> None:
        for label in ("name", "path"):
            if not isinstance(getattr(self, label), str):
                raise InvalidInputError(f"LoraAdapter.{label} must be a str")
        if not self.name or not self.path:
            raise InvalidInputError("LoraAdapter.name and .path must be non-empty")


@dataclass(frozen=True)
class PrefixIdentity:
    """Everything besides token ids and items that decides what a prompt's KV is
    (PFX-7, PFX-8): the LoRA adapter, the ``cache_salt`` (vLLM's per-tenant isolation;
    an empty salt is no salt: vLLM's front end refuses it and its core ignores it), and
    prompt embeddings (a prompt given as one float32 row per position instead of token
    ids; the token ids are then placeholders). Each field is one *kind* of identity."""

    lora: LoraAdapter | None = None
    cache_salt: str | None = None
    prompt_embeds: tuple[tuple[float, ...], ...] | None = None

    def __post_init__(self) -> None:
        if self.lora is not None and not isinstance(self.lora, LoraAdapter):
            raise InvalidInputError("PrefixIdentity.lora must be a LoraAdapter or None")
        if self.cache_salt is not None and not isinstance(self.cache_salt, str):
            raise InvalidInputError("PrefixIdentity.cache_salt must be a str or None")
        if self.prompt_embeds is not None:
            rows = self.prompt_embeds
            if not isinstance(rows, tuple) or not all(isinstance(r, tuple) for r in rows):
                raise InvalidInputError("PrefixIdentity.prompt_embeds must be a tuple of rows")
            widths = {len(row) for row in rows}
            if len(widths) > 1 or 0 in widths:
                raise InvalidInputError(
                    "PrefixIdentity.prompt_embeds rows must be non-empty and of one width"
                )
            if not all(isinstance(v, float) for row in rows for v in row):
                raise InvalidInputError("PrefixIdentity.prompt_embeds values must be floats")

    @property
    def salt(self) -> str | None:
        """The salt that isolates: None for no salt and for the empty one."""
        return self.cache_salt or None


@dataclass(frozen=True)
class RequestView:
    """What the encoder cache manager and the scheduling hook see of a request.
    Items are sorted by offset and do not overlap."""

    request_id: str
    items: tuple[MultiModalItem, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.request_id, str) or not self.request_id:
            raise InvalidInputError("RequestView.request_id must be a non-empty str")
        for prev, nxt in zip(self.items, self.items[1:], strict=False):
            if nxt.mm_position.offset < prev.mm_position.end:
                raise InvalidRangeError(
                    f"request {self.request_id}: items must be sorted and disjoint, but "
                    f"{prev.mm_position} is followed by {nxt.mm_position}"
                )

    def get_num_encoder_embeds(self, input_id: int) -> int:
        return self.item(input_id).num_embeds

    def item(self, input_id: int) -> MultiModalItem:
        if isinstance(input_id, bool) or not isinstance(input_id, int):
            raise InvalidInputError(f"input_id must be an int, got {type(input_id).__name__}")
        if not 0 <= input_id < len(self.items):
            raise InvalidInputError(
                f"request {self.request_id} has {len(self.items)} items; no input_id {input_id}"
            )
        return self.items[input_id]


@dataclass(frozen=True)
class ExpandedPrompt:
    """The processor's output: the expanded token ids and one range per image, in
    marker order."""

    token_ids: tuple[int, ...]
    ranges: tuple[PlaceholderRange, ...]


# --- token-count policies (EXP) ------------------------------------------------------


@dataclass(frozen=True)
class ToyPolicy:
    """The mini-build's rule: ``len(image_bytes) // 64 + 1`` (arrays: ``nbytes``)."""

    name: str = "toy"


@dataclass(frozen=True)
class FixedPolicy:
    """Fixed resolution (LLaVA-1.5): every image becomes ``num_tokens`` tokens."""

    num_tokens: int = 576
    name: str = "fixed"


@dataclass(frozen=True)
class DynamicResolutionPolicy:
    """Qwen2-VL ``smart_resize``: resize to multiples of ``patch_size * merge_size``
    within ``[min_pixels, max_pixels]`` keeping the aspect ratio; one token per
    merged patch. Needs a pixel array."""

    patch_size: int = 14
    merge_size: int = 2
    min_pixels: int = 56 * 56
    max_pixels: int = 28 * 28 * 1280
    name: str = "dynamic"


@dataclass(frozen=True)
class TiledPolicy:
    """InternVL-style tiling: the grid ``rows x cols`` (``min_tiles <= rows*cols <=
    max_tiles``) whose aspect ratio is closest to the image's, plus one thumbnail
    tile when the grid has more than one tile; each tile costs
    ``(tile_size // patch_size) ** 2 // downsample ** 2`` tokens. Needs a pixel array."""

    tile_size: int = 448
    patch_size: int = 14
    downsample: int = 2
    min_tiles: int = 1
    max_tiles: int = 12
    use_thumbnail: bool = True
    name: str = "tiled"


@dataclass(frozen=True)
class RowBreakPolicy:
    """Pixtral-style structured ranges: the image (scaled down to fit
    ``max_image_size``) is ``rows = ceil(h / patch)`` by ``cols = ceil(w / patch)``
    patches; each row is ``cols`` image tokens then a break token (the last row's break
    is an end token). ``is_embed`` is true exactly on image tokens. Needs a pixel array."""

    patch_size: int = 16
    max_image_size: int = 1024
    name: str = "rowbreak"


TokenCountPolicy: TypeAlias = Union[
    ToyPolicy, FixedPolicy, DynamicResolutionPolicy, TiledPolicy, RowBreakPolicy
]


@dataclass(frozen=True)
class ProcessorConfig:
    """Special token ids and the token-count policy. Text tokens are any other
    non-negative ints; the prompt carries ``marker_id`` once per image."""

    policy: TokenCountPolicy = field(default_factory=ToyPolicy)
    marker_id: int = 32000
    placeholder_id: int = 32001
    break_id: int = 32002
    end_id: int = 32003

    def special_ids(self) -> frozenset[int]:
        return frozenset({self.marker_id, self.placeholder_id, self.break_id, self.end_id})


# --- scheduling (SCH) ----------------------------------------------------------------


@dataclass(frozen=True)
class SchedulerConfig:
    """The scheduler settings the encoder-scheduling hook reads."""

    disable_chunked_mm_input: bool = False


@dataclass(frozen=True)
class EncoderBudgetConfig:
    """Inputs of ``compute_mm_encoder_budget`` (vLLM ``SchedulerConfig`` fields)."""

    max_num_encoder_input_tokens: int
    encoder_cache_size: int
    max_num_batched_tokens: int
    disable_chunked_mm_input: bool = False


@dataclass(frozen=True)
class ScheduleDecision:
    """What the hook decided for one request in one step (vLLM's return tuple).

    ``encoder_inputs_to_schedule``: item indices to encode this step (the caller then
    calls ``allocate`` for each). ``duplicate_encoder_inputs``: items whose content is
    already being encoded for this request in this step (the caller takes a reference
    for them with ``check_and_update_cache`` after allocating). ``num_new_tokens``: the
    possibly truncated chunk. ``encoder_compute_budget``: what is left of the budget.
    """

    encoder_inputs_to_schedule: tuple[int, ...]
    num_new_tokens: int
    encoder_compute_budget: int
    duplicate_encoder_inputs: tuple[int, ...] = ()


# --- worker store and engine loop (SYS, PFX) -------------------------------------------


@dataclass(frozen=True)
class GatherSpec:
    """One scheduled chunk's need from one item: placeholder positions
    ``[start_idx, end_idx)`` relative to the item's offset."""

    request_id: str
    mm_hash: str
    mm_position: PlaceholderRange
    start_idx: int
    end_idx: int


@dataclass(frozen=True)
class WorkerStep:
    """One step's instructions to the worker, in vLLM's order of application:
    drop ``freed_mm_hashes``, store ``encoder_outputs``, then serve ``gathers``."""

    freed_mm_hashes: tuple[str, ...]
    encoder_outputs: Mapping[str, Embeddings]
    gathers: tuple[GatherSpec, ...]


@dataclass(frozen=True)
class EngineItem:
    """A multimodal item as the engine receives it: content, identity, position."""

    data: ImageInput
    mm_hash: str
    mm_position: PlaceholderRange


@dataclass(frozen=True)
class EngineRequest:
    """A request with its expanded prompt. Prefill is the whole prompt; the engine
    simulates ``max_new_tokens`` decode steps after it."""

    request_id: str
    token_ids: tuple[int, ...]
    items: tuple[MultiModalItem, ...] = ()
    data: tuple[ImageInput, ...] = ()
    max_new_tokens: int = 1

    def view(self) -> RequestView:
        return RequestView(self.request_id, self.items)


#: KV blocks a running request of a hybrid model may hold for its recurrent states
#: beside its attention blocks (SYS-9, SYS-16): the state its next chunk resumes from and
#: the one that chunk writes (vLLM's ``MambaManager`` in "align" mode)
HYBRID_STATE_BLOCKS = 2


@dataclass(frozen=True)
class EngineConfig:
    """Sizes of the engine loop's resources, all in their own units."""

    token_budget: int = 8
    encoder_compute_budget: int = 6
    encoder_cache_size: int = 8
    num_kv_blocks: int = 16
    block_size: int = 2
    hidden_size: int = 4
    enable_prefix_caching: bool = True
    disable_chunked_mm_input: bool = False
    #: ``k`` >= 1: an EAGLE-style drafter (SYS-13): the hook looks 1 position ahead,
    #: each step's drafter reads every chunk's window shifted by one, and the KV cache
    #: reserves ``k`` look-ahead slots per running request; 0: no drafter
    num_speculative_tokens: int = 0
    #: async scheduling (SYS-15): the scheduler runs one step ahead of the worker —
    #: each ``step()`` schedules the next step and executes the one scheduled before
    async_scheduling: bool = False
    #: a hybrid model (SYS-16): Mamba-style recurrent layers beside attention, whose
    #: state is cached per KV block, only where a chunk ends on the block's boundary
    #: (vLLM's ``mamba_cache_mode="align"``): prefill chunks end on block boundaries
    #: and prefix hits start where a state was cached
    mamba_block_aligned: bool = False

"""The SGLang adapter: SGLang's own code behind the spec's interfaces — never a
re-implementation (docs/sglang.md).

SGLang is imported from ``$MMSPEC_SGLANG_SRC`` (an unpacked release wheel or a
checkout; ``make verify-sglang SGLANG=X`` / ``SGLANG_SRC=path``) in ``.venv-sglang``,
whose torchvision is an import shim (:mod:`adapters.sglang.source`; the report header
names it).

===============  ==================================================================
component        SGLang code
===============  ==================================================================
feature_hasher   ``MultimodalDataItem.set_pad_value`` (``hash_feature``): the identity of
                 an item keyed by its processor output; with a client's ``hash``
                 (HASH-11), ``collect_mm_items_from_processor_output`` first
                 (:mod:`adapters.sglang.features`)
block_hasher     ``MultimodalDataItem.set_pad_value`` (``hash_feature``, the pad-value
                 rule) and the padding routine (``pad_mm_tokens``, or the per-modality
                 ``MultiModalityDataPaddingPatternMultimodalTokens``): the radix key
                 (:mod:`adapters.sglang.prefix`); with a request's LoRA adapter and
                 ``cache_salt`` (PFX-7, PFX-8): ``LoRARef``'s ``lora_id``, ``Req``'s
                 ``extra_key``, ``RadixKey``'s child key (0.5.3: the salt through
                 ``OpenAIServingBase._compute_extra_key``)
embedding_cache  ``MultiModalStaticCache`` (0.5.22+) or ``MultiModalCache`` (0.5.3):
                 the content-keyed embedding cache (:mod:`adapters.sglang.embedding_cache`)
worker_store     the same cache and ``mm_schedule``'s chunk slicing (``_item_overlap``,
                 ``_slice_item_chunk``; 0.5.3: ``mm_utils.get_embedding_chunk``) over the
                 runs ``get_mm_items_offset`` finds: a store that keeps its own cache
                 (``self_managed``), judged on its gathers (WRK-3, WRK-4;
                 :mod:`adapters.sglang.worker`)
splice           ``mm_schedule._adjust_embedding_length`` then
                 ``mm_utils._scatter_mm_embedding``, as ``embed_mm_inputs`` calls them
                 (0.5.22 and later; :mod:`adapters.sglang.splice`)
===============  ==================================================================

Not provided (not yet wrapped, or no equivalent): the hasher (SGLang hashes the
processor's output tensors, not ``(data, options)``: the feature hasher judges that),
the splice in 0.5.3 (inline in
``embed_mm_inputs``), the encoder cache manager (SGLang's cache has no references:
the embedding cache judges it), the processor, encoder, scheduling hook and engine loop.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from types import ModuleType, SimpleNamespace

from spec.adapter import Adapter

from .embedding_cache import SglangEmbeddingCache
from .features import SglangFeatureHasher
from .prefix import NamespaceCode, SglangBlockHasher
from .source import SglangSource, SglangSourceError, SglangUnavailableError, load_sglang
from .splice import SglangSplice
from .splice import available as splice_available
from .worker import SglangWorkerStore


def _optional_module(name: str) -> ModuleType | None:
    """A module older releases lack (``mm_schedule`` is new by 0.5.22): None there."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:
            raise
        return None


def _splice_factory(
    mm_utils: ModuleType, mm_schedule: ModuleType | None
) -> Callable[[], SglangSplice] | None:
    """SGLang's splice where the release has its functions (0.5.22+), else not provided."""
    if mm_schedule is None or not splice_available(mm_utils, mm_schedule):
        return None
    return lambda: SglangSplice(mm_utils, mm_schedule)


SGLANG, SOURCE = load_sglang()
SCHEDULE_BATCH = importlib.import_module("sglang.srt.managers.schedule_batch")
MM_UTILS = importlib.import_module("sglang.srt.managers.mm_utils")
MM_SCHEDULE = _optional_module("sglang.srt.managers.mm_schedule")
TORCH = importlib.import_module("torch")
MULTIMODAL_CACHE = importlib.import_module("sglang.srt.mem_cache.multimodal_cache")


def _namespace_code() -> NamespaceCode:
    """The code that builds a request's radix namespace (PFX-7, PFX-8): ``LoRARef``,
    ``SamplingParams`` and ``RadixKey``, and where ``Req`` takes no ``cache_salt``
    (0.5.3) the OpenAI layer's ``_compute_extra_key``, which folds the salt into
    ``extra_key``."""
    req_takes_salt = "cache_salt" in inspect.signature(SCHEDULE_BATCH.Req.__init__).parameters
    compute_extra_key = None
    if not req_takes_salt:
        serving = importlib.import_module("sglang.srt.entrypoints.openai.serving_base")
        compute_extra_key = serving.OpenAIServingBase._compute_extra_key
    return NamespaceCode(
        radix_cache=importlib.import_module("sglang.srt.mem_cache.radix_cache"),
        lora_ref=importlib.import_module("sglang.srt.lora.lora_registry").LoRARef,
        sampling_params=importlib.import_module(
            "sglang.srt.sampling.sampling_params"
        ).SamplingParams,
        compute_extra_key=compute_extra_key,
    )


NAMESPACE = _namespace_code()
BASE_PROCESSOR = importlib.import_module(
    "sglang.srt.multimodal.processors.base_processor"
).BaseMultimodalProcessor

#: What the worker store calls: the cache, the processor's run finder, the slicing.
WORKER_MODULES = SimpleNamespace(
    torch=TORCH,
    multimodal_cache=MULTIMODAL_CACHE,
    base_processor=BASE_PROCESSOR,
    schedule_batch=SCHEDULE_BATCH,
    mm_schedule=MM_SCHEDULE,
    mm_utils=MM_UTILS,
)

ADAPTER = Adapter(
    name=SOURCE.describe(),
    feature_hasher=lambda: SglangFeatureHasher(SCHEDULE_BATCH, TORCH, BASE_PROCESSOR),
    block_hasher=lambda size: SglangBlockHasher(SCHEDULE_BATCH, MM_UTILS, size, NAMESPACE),
    splice=_splice_factory(MM_UTILS, MM_SCHEDULE),
    embedding_cache=lambda capacity: SglangEmbeddingCache(MULTIMODAL_CACHE, TORCH, capacity),
    worker_store=lambda: SglangWorkerStore(WORKER_MODULES),
)

__all__ = [
    "ADAPTER",
    "SOURCE",
    "SglangSource",
    "SglangSourceError",
    "SglangUnavailableError",
]

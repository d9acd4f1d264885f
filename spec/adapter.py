"""The adapter contract (docs/grading.md, "Wrap your build in the template", for students).

An adapter is a module (importable name or ``.py`` path) with one attribute,
``ADAPTER``, an :class:`Adapter`. Each field is a factory for one component, or
``None`` when the implementation does not provide it (reported "not provided", never
"passed"). Composite properties fill the gaps with the reference's factories and the
report names which implementation stood behind each component.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from spec.components import (
    BlockHasher,
    EmbeddingCache,
    Encoder,
    EncoderCacheManager,
    EncoderDecoderCacheManager,
    EngineLoop,
    FeatureHasher,
    Hasher,
    ItemCache,
    Processor,
    SchedulingHook,
    Splice,
    WorkerStore,
)
from spec.types import EngineConfig, ProcessorConfig, SchedulerConfig


@dataclass(frozen=True)
class EngineParts:
    """The component factories an engine loop composes: the adapter's where it has
    them, the reference's elsewhere."""

    hasher: Callable[[], Hasher]
    encoder: Callable[[int], Encoder]
    encoder_cache_manager: Callable[[int], EncoderCacheManager]
    scheduling_hook: Callable[[SchedulerConfig], SchedulingHook]
    block_hasher: Callable[[int], BlockHasher]
    worker_store: Callable[[], WorkerStore]


@dataclass(frozen=True)
class Adapter:
    """Names an implementation and provides factories for the components it has."""

    name: str
    processor: Callable[[ProcessorConfig], Processor] | None = None
    hasher: Callable[[], Hasher] | None = None
    #: Optional: the identity of processed features (HASH-9, HASH-10), for an engine that
    #: keys items by their processor output (SGLang); "not provided" elsewhere.
    feature_hasher: Callable[[], FeatureHasher] | None = None
    encoder: Callable[[int], Encoder] | None = None
    encoder_cache_manager: Callable[[int], EncoderCacheManager] | None = None
    encoder_decoder_cache_manager: Callable[[int], EncoderDecoderCacheManager] | None = None
    splice: Callable[[], Splice] | None = None
    scheduling_hook: Callable[[SchedulerConfig], SchedulingHook] | None = None
    block_hasher: Callable[[int], BlockHasher] | None = None
    item_cache: Callable[[int], ItemCache] | None = None
    #: Optional: a content-keyed embedding cache without references (EMB), built from its
    #: capacity in bytes (SGLang's MultiModalStaticCache); "not provided" elsewhere.
    embedding_cache: Callable[[int], EmbeddingCache] | None = None
    worker_store: Callable[[], WorkerStore] | None = None
    engine_loop: Callable[[EngineConfig, EngineParts], EngineLoop] | None = None
    #: Capabilities the implementation declares it does not attempt (e.g. "is_embed",
    #: "chunking"); graders show their items as "not attempted".
    not_attempted: frozenset[str] = field(default_factory=frozenset)
    #: Component -> the code behind it, where the adapter's name does not say (the vLLM
    #: adapter's engine loop is vLLM's ``Scheduler``); reports show it after the name.
    implemented_by: Mapping[str, str] = field(default_factory=dict)


#: Component names in report order, with the Protocol each factory's product must meet.
COMPONENTS: tuple[tuple[str, type], ...] = (
    ("processor", Processor),
    ("hasher", Hasher),
    ("feature_hasher", FeatureHasher),
    ("encoder", Encoder),
    ("encoder_cache_manager", EncoderCacheManager),
    ("encoder_decoder_cache_manager", EncoderDecoderCacheManager),
    ("splice", Splice),
    ("scheduling_hook", SchedulingHook),
    ("block_hasher", BlockHasher),
    ("item_cache", ItemCache),
    ("embedding_cache", EmbeddingCache),
    ("worker_store", WorkerStore),
    ("engine_loop", EngineLoop),
)

"""The reference implementation behind the adapter contract (``spec/adapter.py``): the
default adapter every property runs against."""

from __future__ import annotations

from reference.embedding_cache import EmbeddingCache
from reference.encoder import Encoder
from reference.encoder_cache import EncoderCacheManager
from reference.encoder_decoder_cache import EncoderDecoderCacheManager
from reference.engine import EngineLoop
from reference.hasher import FeatureHasher, Hasher
from reference.item_cache import ItemCache
from reference.prefix import BlockHasher
from reference.processor import Processor
from reference.scheduling import SchedulingHook
from reference.splice import Splice
from reference.worker import WorkerStore
from spec.adapter import Adapter

ADAPTER = Adapter(
    name="reference",
    processor=Processor,
    hasher=Hasher,
    feature_hasher=FeatureHasher,
    encoder=Encoder,
    encoder_cache_manager=EncoderCacheManager,
    encoder_decoder_cache_manager=EncoderDecoderCacheManager,
    splice=Splice,
    scheduling_hook=SchedulingHook,
    block_hasher=BlockHasher,
    item_cache=ItemCache,
    embedding_cache=EmbeddingCache,
    worker_store=WorkerStore,
    engine_loop=EngineLoop,
)

"""The SGLang adapter: SGLang's own code behind the spec's interfaces — never a
re-implementation (docs/sglang.md).

SGLang is imported from ``$MMSPEC_SGLANG_SRC`` (an unpacked release wheel or a
checkout; ``make verify-sglang SGLANG=X`` / ``SGLANG_SRC=path``) in ``.venv-sglang``,
whose torchvision is an import shim (:mod:`adapters.sglang.source`; the report header
names it).

=============  ==================================================================
component      SGLang code
=============  ==================================================================
block_hasher   ``MultimodalDataItem.set_pad_value`` (``hash_feature``, the pad-value
               rule) and the padding routine (``pad_mm_tokens``, or the per-modality
               ``MultiModalityDataPaddingPatternMultimodalTokens``): the radix key
               (:mod:`adapters.sglang.prefix`)
=============  ==================================================================

Not provided (not yet wrapped, or no equivalent): the hasher (SGLang hashes the
processor's output tensors, not ``(data, options)``), the splice (``embed_mm_inputs``
needs a model's embedding module), the encoder cache manager (``MultiModalCache``: to
be judged against ECM), the processor, encoder, scheduling hook, worker store and engine
loop.
"""

from __future__ import annotations

import importlib

from spec.adapter import Adapter

from .prefix import SglangBlockHasher
from .source import SglangSource, SglangSourceError, SglangUnavailableError, load_sglang

SGLANG, SOURCE = load_sglang()
SCHEDULE_BATCH = importlib.import_module("sglang.srt.managers.schedule_batch")
MM_UTILS = importlib.import_module("sglang.srt.managers.mm_utils")

ADAPTER = Adapter(
    name=SOURCE.describe(),
    block_hasher=lambda size: SglangBlockHasher(SCHEDULE_BATCH, MM_UTILS, size),
)

__all__ = [
    "ADAPTER",
    "SOURCE",
    "SglangSource",
    "SglangSourceError",
    "SglangUnavailableError",
]

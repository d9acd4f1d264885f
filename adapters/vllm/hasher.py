"""vLLM's ``MultiModalHasher`` behind ``spec.components.Hasher``.

An item's hash is what vLLM's processor computes for it
(``vllm/multimodal/processing``: ``hash_kwargs(model_id=..., <modality>=item,
**hf_processor_mm_kwargs)``): the data under its modality's key, the processor options
as further keyword arguments, and the model id. The algorithm is vLLM's default,
passed positionally since 0.33 (row ``hasher_algorithm_arg`` of
:mod:`adapters.vllm.versions`) and read from ``VLLM_MM_HASHER_ALGORITHM`` before.
"""

from __future__ import annotations

from collections.abc import Mapping

from spec.types import HashInput

from .requests_bridge import MODALITY
from .versions import DEFAULT_MM_HASHER_ALGORITHM, Api, VllmCode

#: The model id every hash is taken under (a constant: the properties compare hashes of
#: one model).
MODEL_ID = "mmspec/vlm"


class VllmHasher:
    """``MultiModalHasher.hash_kwargs`` as vLLM's processor calls it."""

    def __init__(self, code: VllmCode, api: Api) -> None:
        self._hasher = code.module("hasher").MultiModalHasher
        self._algorithm_arg = api.has("hasher_algorithm_arg")

    def hash_item(self, data: HashInput, options: Mapping[str, HashInput] | None = None) -> str:
        # Spread as vLLM's processor spreads them: an option named like the modality
        # or "model_id" is a TypeError there, and here.
        hash_kwargs = self._hasher.hash_kwargs
        item = {MODALITY: data}
        extra = dict(options or {})
        if self._algorithm_arg:
            digest = hash_kwargs(DEFAULT_MM_HASHER_ALGORITHM, model_id=MODEL_ID, **item, **extra)
        else:
            digest = hash_kwargs(model_id=MODEL_ID, **item, **extra)
        return str(digest)

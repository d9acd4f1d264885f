"""SGLang's embedding cache behind ``spec.components.EmbeddingCache`` (SPEC.md EMB).

``MultiModalStaticCache`` (0.5.22, 0.5.23) or ``MultiModalCache`` (0.5.3), from
``sglang/srt/mem_cache/multimodal_cache.py``, built with the capacity as its
``max_size`` in bytes. A key becomes the 64-bit int SGLang keys items by (the first 8
bytes of its SHA-256, as ``hash_feature`` makes them), an embedding a torch tensor
sharing the array's memory, as the encoder's output is handed over:

- 0.5.22, 0.5.23: ``set(hash, EmbeddingResult(embedding=tensor))`` and
  ``get_single(hash)``, the pair ``mm_schedule``'s per-item path uses (its other path
  keys a request's items by ``combine_hashes`` in both calls);
- 0.5.3: ``put(hash, tensor)`` and ``get(hash)``, as ``mm_utils.embed_mm_inputs`` calls them.

``held()`` reads the cache's ``mm_cache`` (an ``OrderedDict``, least recently used first)
and charges each entry what the release's own size function says
(``_get_tensor_size``: the storage's bytes since 0.5.22, element size × count in 0.5.3).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spec.errors import InvalidInputError


def sglang_key(key: str) -> int:
    """The 64-bit item hash standing for ``key``."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")


class SglangEmbeddingCache:
    """The release's embedding cache of ``capacity`` bytes."""

    def __init__(self, module: Any, torch: Any, capacity: int) -> None:
        self._module = module
        self._torch = torch
        self._static = hasattr(module, "MultiModalStaticCache")
        self._cache = (
            module.MultiModalStaticCache(capacity) if self._static
            else module.MultiModalCache(capacity)
        )
        self._keys: dict[int, str] = {}

    def _size(self, tensor: Any) -> int:
        if self._static:
            return int(self._module._get_tensor_size(tensor))
        return int(self._cache._get_tensor_size(tensor))

    def put(self, key: str, embedding: NDArray[Any]) -> bool:
        if not isinstance(embedding, np.ndarray):
            raise InvalidInputError(f"an embedding is an array, not {type(embedding).__name__}")
        item_hash = sglang_key(key)
        self._keys[item_hash] = key
        tensor = self._torch.from_numpy(embedding)
        if self._static:
            return bool(self._cache.set(item_hash, self._module.EmbeddingResult(embedding=tensor)))
        return bool(self._cache.put(item_hash, tensor))

    def get(self, key: str) -> NDArray[Any] | None:
        tensor = self.tensor(key)
        return None if tensor is None else tensor.numpy()

    def tensor(self, key: str) -> Any:
        """The cached torch tensor of ``key`` (None on a miss), as SGLang's lookup gives
        it: ``get_single(hash).embedding`` (0.5.3: ``get(hash)``)."""
        item_hash = sglang_key(key)
        if self._static:
            result = self._cache.get_single(item_hash)
            return None if result is None else result.embedding
        return self._cache.get(item_hash)

    def held(self) -> Mapping[str, int]:
        entries = self._cache.mm_cache.items()
        return {
            self._keys.get(item_hash, f"{item_hash:016x}"): self._size(
                entry.embedding if self._static else entry
            )
            for item_hash, entry in entries
        }

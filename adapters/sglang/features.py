"""SGLang's identity of processed features behind ``spec.components.FeatureHasher``
(SPEC.md HASH-9, HASH-10).

An item that carries no hash of its own — one a client sends as ``processor_output`` or
``precomputed_embedding`` (0.5.22 and later set its pad value on arrival), or one whose
processor set none (0.5.3: every item) — is keyed by its ``feature``:
``MultimodalDataItem.set_pad_value`` → ``mm_utils.hash_feature`` (0.5.23 through
``multimodal/cache/identity.py::resolve_multimodal_item_hash``), and that hash becomes the
item's pad values (the radix key) and its embedding-cache key. ``feature_identity`` builds
the item as SGLang's processors do — the feature a torch tensor, or a list of them, as the
HF processors return them — lets the release's own ``set_pad_value`` hash it and returns
``MultimodalDataItem.hash``. Arrays become tensors sharing their memory and strides
(``torch.from_numpy``): nothing is copied or made contiguous on SGLang's behalf.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spec.errors import InvalidInputError
from spec.types import ProcessedFeature


class SglangFeatureHasher:
    """``set_pad_value``'s hash of an item holding ``feature``."""

    def __init__(self, schedule_batch: Any, torch: Any) -> None:
        self._schedule_batch = schedule_batch
        self._torch = torch

    def _tensor(self, array: object) -> Any:
        if not isinstance(array, np.ndarray):
            raise InvalidInputError(
                f"a processed feature is an array or a list of arrays, not {type(array).__name__}"
            )
        return self._torch.from_numpy(array)

    def feature_identity(self, feature: ProcessedFeature) -> str:
        if isinstance(feature, np.ndarray):
            tensors: Any = self._tensor(feature)
        elif isinstance(feature, Sequence) and not isinstance(feature, (str, bytes)):
            tensors = [self._tensor(array) for array in feature]
        else:
            raise InvalidInputError(
                f"a processed feature is an array or a list of arrays, not {type(feature).__name__}"
            )
        item = self._schedule_batch.MultimodalDataItem(modality=self._schedule_batch.Modality.IMAGE)
        item.feature = tensors
        item.offsets = [(0, 0)]
        item.set_pad_value()
        return f"{int(item.hash):016x}"

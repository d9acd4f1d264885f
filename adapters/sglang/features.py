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
from types import SimpleNamespace
from typing import Any

import numpy as np

from spec.errors import InvalidInputError
from spec.types import ProcessedFeature


class SglangFeatureHasher:
    """``set_pad_value``'s hash of an item holding ``feature``."""

    def __init__(self, schedule_batch: Any, torch: Any, processor_class: Any) -> None:
        self._schedule_batch = schedule_batch
        self._torch = torch
        #: ``BaseMultimodalProcessor``, whose dict-item path reads a client's ``hash``
        self._processor_class = processor_class

    def _tensor(self, array: object) -> Any:
        if not isinstance(array, np.ndarray):
            raise InvalidInputError(
                f"a processed feature is an array or a list of arrays, not {type(array).__name__}"
            )
        return self._torch.from_numpy(array)

    def _tensors(self, feature: ProcessedFeature) -> Any:
        if isinstance(feature, np.ndarray):
            return self._tensor(feature)
        if isinstance(feature, Sequence) and not isinstance(feature, (str, bytes)):
            return [self._tensor(array) for array in feature]
        raise InvalidInputError(
            f"a processed feature is an array or a list of arrays, not {type(feature).__name__}"
        )

    def feature_identity(self, feature: ProcessedFeature) -> str:
        item = self._schedule_batch.MultimodalDataItem(modality=self._schedule_batch.Modality.IMAGE)
        item.feature = self._tensors(feature)
        item.offsets = [(0, 0)]
        item.set_pad_value()
        return f"{int(item.hash):016x}"

    def feature_identifier(self, feature: ProcessedFeature, client_hash: str | None) -> str:
        """The item a client sends as a ``processor_output`` dict — its feature, its
        modality and, when ``client_hash`` is given, a ``hash`` field (the integer
        ``feature_identity`` writes in hex) — through the release's own
        ``BaseMultimodalProcessor.collect_mm_items_from_processor_output`` (called
        with a stand-in for the processor holding the two tables it reads: no feature
        name to rename, and ``feature`` an image field), then ``set_pad_value``
        as the item meets it on arrival."""
        if client_hash is None:
            return self.feature_identity(feature)
        try:
            hash_value = int(client_hash, 16)
        except (TypeError, ValueError):
            raise InvalidInputError(
                f"SGLang's item hash is an integer; {client_hash!r} is not one in hex"
            ) from None
        processor = SimpleNamespace(  # the two tables the method reads of its processor
            FEATURE_NAMES=[],
            ATTR_NAME_TO_MODALITY={"feature": self._schedule_batch.Modality.IMAGE},
        )
        data = {"feature": self._tensors(feature), "hash": hash_value, "modality": "image"}
        collect = self._processor_class.collect_mm_items_from_processor_output
        (item,) = collect(processor, data)
        item.set_pad_value()
        return f"{int(item.hash):016x}"

"""SGLang's prefix-cache keys behind ``spec.components.BlockHasher`` (SPEC.md PFX).

SGLang has no per-block extra keys. Each item's content hash becomes *pad values*
written over its placeholder positions, and the radix cache (``sglang/srt/mem_cache/
radix_cache.py``) matches requests on those padded token ids, page by page: two requests
share page ``i`` exactly when their padded ids agree on pages ``0..i``. So:

- ``request_block_hashes`` runs SGLang's own pipeline — the item built as SGLang's
  processor builds it, ``MultimodalDataItem.set_pad_value`` (``hash_feature`` of the
  feature, then the release's pad-value rule), and the release's padding routine — and
  returns, per full block, a SHA-256 of the padded prefix up to that block's end: equal
  exactly when the radix key prefixes are equal (the digest adds no collision a search
  could reach, and removes none).
- No ``block_extra_keys``: there is nothing in SGLang it could call, so the block hasher
  lacks that optional capability (``spec.components.BlockExtraKeys``) and PFX-3 is
  ``not provided`` (docs/sglang.md); PFX-4..6 judge the hashes.

An item's feature stands for its pixels: one row of 32 bytes, the SHA-256 of its
``mm_hash`` (a fixed-width row, as pixel patches are, so concatenating rows is
unambiguous). Two release layouts (:func:`per_item`):

- per item (0.5.22, 0.5.23): one ``MultimodalDataItem`` per image, its placeholder range
  as ``offsets``;
- per modality (0.5.3): one item holds every image of the prompt
  (``BaseMultimodalProcessor.collect_mm_items_from_processor_output``), its feature their
  rows concatenated, so every image token gets the one pad value.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from spec.types import MultiModalItem

#: The image token id written at placeholder positions before SGLang pads them: never
#: a real token id, so only item positions carry it.
IMAGE_TOKEN_ID = -1


def identity_row(mm_hash: str) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """The item's stand-in pixels: a (1, 32) uint8 row."""
    digest = hashlib.sha256(mm_hash.encode("utf-8")).digest()
    return np.frombuffer(digest, dtype=np.uint8).reshape(1, 32).copy()


def _marked(token_ids: Sequence[int], items: Sequence[MultiModalItem]) -> list[int]:
    if any(token < 0 for token in token_ids):
        raise ValueError("token ids must be non-negative")
    marked = list(token_ids)
    for item in items:
        pos = item.mm_position
        marked[pos.offset : pos.offset + pos.length] = [IMAGE_TOKEN_ID] * pos.length
    return marked


def _offsets(item: MultiModalItem) -> tuple[int, int]:
    """SGLang's inclusive ``(start, end)``."""
    return item.mm_position.offset, item.mm_position.offset + item.mm_position.length - 1


#: How a release's ``MultimodalDataItem`` docstring states its layout.
PER_ITEM = "represents a single multimodal input"
PER_MODALITY = "contains all inputs for one modality"


def per_item(schedule_batch: Any) -> bool:
    """Whether the release builds one ``MultimodalDataItem`` per image (else one per
    modality), as its ``MultimodalDataItem`` docstring states."""
    doc = schedule_batch.MultimodalDataItem.__doc__ or ""
    if PER_ITEM in doc:
        return True
    if PER_MODALITY in doc:
        return False
    raise RuntimeError("MultimodalDataItem's docstring states neither layout: read the release")


def _items(schedule_batch: Any, items: Sequence[MultiModalItem]) -> list[Any]:
    image = schedule_batch.Modality.IMAGE
    if per_item(schedule_batch):
        groups = [[item] for item in items]
    else:
        groups = [list(items)]
    built = []
    for group in groups:
        sgl_item = schedule_batch.MultimodalDataItem(modality=image)
        sgl_item.feature = np.concatenate([identity_row(item.mm_hash) for item in group])
        sgl_item.offsets = [_offsets(item) for item in group]
        sgl_item.set_pad_value()
        built.append(sgl_item)
    return built


def padded_ids(
    schedule_batch: Any, mm_utils: Any, token_ids: Sequence[int], items: Sequence[MultiModalItem]
) -> list[int]:
    """The radix key SGLang builds for this prompt: its token ids with pad values, by
    the padding pattern its models' ``pad_input_ids`` use for runs of image tokens
    (``MultiModalityDataPaddingPatternMultimodalTokens``; since 0.5.22 it takes an int64
    ``array``, which earlier releases accept too)."""
    marked = _marked(token_ids, items)
    if not items:
        return marked
    inputs = schedule_batch.MultimodalInputs(
        mm_items=_items(schedule_batch, items), im_token_id=IMAGE_TOKEN_ID
    )
    pattern = mm_utils.MultiModalityDataPaddingPatternMultimodalTokens()
    return [int(token) for token in pattern.pad_input_tokens(array("q", marked), inputs)]


class SglangBlockHasher:
    """Per full block, the identity of the radix key prefix SGLang matches on."""

    def __init__(self, schedule_batch: Any, mm_utils: Any, block_size: int) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self._schedule_batch = schedule_batch
        self._mm_utils = mm_utils
        self._block_size = block_size

    def request_block_hashes(
        self, token_ids: Sequence[int], items: Sequence[MultiModalItem]
    ) -> list[str]:
        key = padded_ids(self._schedule_batch, self._mm_utils, token_ids, items)
        prefix = hashlib.sha256()
        hashes = []
        for block in range(len(key) // self._block_size):
            page = key[block * self._block_size : (block + 1) * self._block_size]
            for token in page:
                prefix.update(int(token).to_bytes(8, "little", signed=True))
            hashes.append(prefix.copy().hexdigest())
        return hashes

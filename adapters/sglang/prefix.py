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
- ``request_block_hashes_with`` (PFX-7, PFX-8): the radix key's namespace. SGLang keys a
  LoRA adapter by its ``lora_id`` — for an adapter loaded at start-up, since 0.5.22
  ``LoRARef.deterministic_id(name, path)`` (a ``uuid5``), before it the ``uuid4`` every
  ``LoRARef`` draws (one ``LoRARef`` per distinct name and path here: a name loaded again
  from other weights is a new ref) — and a ``cache_salt`` by the text: 0.5.3's OpenAI layer
  folds it into ``extra_key`` (``OpenAIServingBase._compute_extra_key``), 0.5.22 and
  later carry it as ``Req.cache_salt``. The release's own ``Req`` then builds
  ``extra_key`` (``(extra_key or "") + lora_id``), and its ``RadixKey`` the child key the
  tree matches on (``get_child_key`` / ``RadixKey.child_key``); a block's hash starts
  from that key's namespace. Prompt embeddings never reach the radix cache (the
  tokenizer manager refuses ``input_embeds`` unless it is disabled), so
  ``identity_kinds()`` leaves them out and such a request raises.

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
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from spec.errors import InvalidInputError
from spec.types import MultiModalItem, PrefixIdentity

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


@dataclass(frozen=True)
class NamespaceCode:
    """The release's code that builds a request's radix namespace."""

    radix_cache: Any
    lora_ref: Any
    sampling_params: Any
    #: 0.5.3's ``OpenAIServingBase._compute_extra_key`` (None where ``Req`` takes
    #: ``cache_salt`` itself)
    compute_extra_key: Any = None


class SglangBlockHasher:
    """Per full block, the identity of the radix key prefix SGLang matches on."""

    def __init__(
        self,
        schedule_batch: Any,
        mm_utils: Any,
        block_size: int,
        namespace: NamespaceCode | None = None,
    ) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self._schedule_batch = schedule_batch
        self._mm_utils = mm_utils
        self._block_size = block_size
        self._namespace = namespace
        #: the adapters loaded so far: one LoRARef (and lora_id) per name and path
        self._lora_refs: dict[tuple[str, str], Any] = {}

    def request_block_hashes(
        self, token_ids: Sequence[int], items: Sequence[MultiModalItem]
    ) -> list[str]:
        return self._chained(padded_ids(self._schedule_batch, self._mm_utils, token_ids, items))

    def identity_kinds(self) -> tuple[str, ...]:
        return ("lora", "cache_salt")

    def request_block_hashes_with(
        self, token_ids: Sequence[int], items: Sequence[MultiModalItem], identity: PrefixIdentity
    ) -> list[str]:
        if self._namespace is None:
            raise RuntimeError("this SglangBlockHasher was built without SGLang's namespace code")
        if identity.prompt_embeds is not None:
            raise InvalidInputError(
                "SGLang refuses input_embeds while the radix cache is on (TokenizerManager: "
                "'input_embeds is provided while disable_radix_cache is False')"
            )
        key = padded_ids(self._schedule_batch, self._mm_utils, token_ids, items)
        return self._chained(key, self._namespace_key(identity))

    def _namespace_key(self, identity: PrefixIdentity) -> object:
        """The child key SGLang's radix tree gives a one-token page of this request: the
        token alone when the request has no namespace, else the namespace with it."""
        code = self._namespace
        assert code is not None
        lora_id = None
        if identity.lora is not None:
            name_and_path = (identity.lora.name, identity.lora.path)
            if name_and_path not in self._lora_refs:
                self._lora_refs[name_and_path] = self._loaded(*name_and_path)
            lora_id = self._lora_refs[name_and_path].lora_id
        request_fields: dict[str, Any] = {}
        if code.compute_extra_key is not None:  # 0.5.3: the salt travels in extra_key
            request = SimpleNamespace(cache_salt=identity.cache_salt, extra_key=None)
            request_fields["extra_key"] = code.compute_extra_key(None, request)
        else:
            request_fields["cache_salt"] = identity.cache_salt
        req = self._schedule_batch.Req(
            "mmspec-namespace", "", [0], code.sampling_params(max_new_tokens=1),
            lora_id=lora_id, **request_fields,
        )
        radix_key = code.radix_cache.RadixKey
        if hasattr(radix_key, "child_key"):
            salt = getattr(req, "cache_salt", None)
            return radix_key([0], req.extra_key, cache_salt=salt).child_key(1)
        return code.radix_cache.get_child_key(radix_key([0], req.extra_key), 1)

    def _loaded(self, name: str, path: str) -> Any:
        """The ``LoRARef`` of an adapter loaded at start-up (``--lora-paths``): since
        0.5.22 its id is ``LoRARef.deterministic_id(name, path)`` (``arg_groups/
        lora_hook.py``), before it the ``uuid4`` every ``LoRARef`` draws."""
        ref = self._namespace.lora_ref if self._namespace is not None else None
        assert ref is not None
        if hasattr(ref, "deterministic_id"):
            return ref(lora_id=ref.deterministic_id(name, path), lora_name=name, lora_path=path)
        return ref(lora_name=name, lora_path=path)

    def _chained(self, key: Sequence[int], namespace: object = 0) -> list[str]:
        """A SHA-256 per full block of the padded key's prefix, after the namespace's
        ``repr`` when the request has one (``0``, the bare token: none)."""
        prefix = hashlib.sha256()
        if namespace != 0:
            tag = repr(namespace).encode("utf-8")
            prefix.update(len(tag).to_bytes(8, "little") + tag)
        hashes = []
        for block in range(len(key) // self._block_size):
            page = key[block * self._block_size : (block + 1) * self._block_size]
            for token in page:
                prefix.update(int(token).to_bytes(8, "little", signed=True))
            hashes.append(prefix.copy().hexdigest())
        return hashes

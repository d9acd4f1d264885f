"""vLLM's prefix-cache block hashing with multimodal extra keys
(``vllm/v1/core/kv_cache_utils.py``) behind ``spec.components.BlockHasher``.

``request_block_hashes`` builds a vLLM ``Request`` with the request block hasher the
engine core installs (``get_request_block_hasher(block_size, get_hash_fn_by_name(
"sha256"))`` after ``init_none_hash``): vLLM's constructor hashes the prompt's full
blocks into ``request.block_hashes``, which are returned as hex strings.
``block_extra_keys`` is vLLM's ``generate_block_hash_extra_keys`` for one block.

``request_block_hashes_with`` (PFX-7, PFX-8's optional capability) builds the same
``Request`` with the identity in vLLM's fields: ``lora_request`` a ``LoRARequest`` (its
``lora_int_id`` one per distinct name and path, as the server numbers an adapter it
loads — a name unloaded and loaded again from other weights gets a new one),
``cache_salt``, and ``prompt_embeds`` a float32 tensor with the token ids alongside.

Key format (rows ``mm_extra_key_offset``/``mm_extra_key_tag`` of
:mod:`adapters.vllm.versions`): the spec's ``(mm_hash, offset - start)`` is vLLM's pair
before 0.33 and its ``("mm", mm_hash, offset - start)`` since; a vLLM that keys a block
by ``mm_hash`` alone (0.11) gives ``(mm_hash,)`` — there is no offset to report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from spec.types import MultiModalItem, PrefixIdentity

from .requests_bridge import vllm_request
from .versions import DEFAULT_PREFIX_CACHING_HASH_ALGO, Api, VllmApiError, VllmCode

_REQUEST_ID = "block-hashing"
_FILLER_TOKEN = 0

#: ``init_none_hash`` sets a process-wide seed; the engine calls it once at start-up.
_none_hash_ready: set[int] = set()


class VllmBlockHasher:
    """``spec.components.BlockHasher`` on vLLM's ``kv_cache_utils``."""

    def __init__(self, code: VllmCode, api: Api, block_size: int) -> None:
        self._code = code
        self._api = api
        self._kv = code.module("kv_cache_utils")
        hashing = code.module("hashing" if api.has("hash_fn_module") else "utils")
        hash_fn = hashing.get_hash_fn_by_name(DEFAULT_PREFIX_CACHING_HASH_ALGO)
        if id(self._kv) not in _none_hash_ready:
            self._kv.init_none_hash(hash_fn)
            _none_hash_ready.add(id(self._kv))
        self._request_hasher = self._kv.get_request_block_hasher(block_size, hash_fn)
        self._lora_ids: dict[tuple[str, str], int] = {}

    def block_extra_keys(
        self, items: Sequence[MultiModalItem], start_token_idx: int, end_token_idx: int
    ) -> tuple[tuple[Any, ...], ...]:
        prompt_len = max([end_token_idx, *(item.mm_position.end for item in items)])
        request = vllm_request(self._code, _REQUEST_ID, [_FILLER_TOKEN] * prompt_len, items)
        keys, _ = self._kv.generate_block_hash_extra_keys(
            request, start_token_idx, end_token_idx, 0
        )
        return tuple(self._spec_key(key) for key in keys or ())

    def request_block_hashes(
        self, token_ids: Sequence[int], items: Sequence[MultiModalItem]
    ) -> list[str]:
        request = vllm_request(
            self._code, _REQUEST_ID, token_ids, items, block_hasher=self._request_hasher
        )
        return [bytes(block_hash).hex() for block_hash in request.block_hashes]

    def request_block_hashes_with(
        self,
        token_ids: Sequence[int],
        items: Sequence[MultiModalItem],
        identity: PrefixIdentity,
    ) -> list[str]:
        embeds = None
        if identity.prompt_embeds is not None:
            embeds = torch.tensor(identity.prompt_embeds, dtype=torch.float32)
        request = vllm_request(
            self._code,
            _REQUEST_ID,
            token_ids,
            items,
            block_hasher=self._request_hasher,
            lora_request=self._lora_request(identity),
            cache_salt=identity.cache_salt,
            prompt_embeds=embeds,
        )
        return [bytes(block_hash).hex() for block_hash in request.block_hashes]

    def _lora_request(self, identity: PrefixIdentity) -> Any:
        if identity.lora is None:
            return None
        key = (identity.lora.name, identity.lora.path)
        lora_int_id = self._lora_ids.setdefault(key, len(self._lora_ids) + 1)
        return self._code.module("lora_request").LoRARequest(
            lora_name=identity.lora.name, lora_int_id=lora_int_id, lora_path=identity.lora.path
        )

    def _spec_key(self, key: object) -> tuple[Any, ...]:
        if self._api.has("mm_extra_key_tag"):
            if isinstance(key, tuple) and len(key) == 3 and key[0] == "mm":
                return (key[1], key[2])
        elif self._api.has("mm_extra_key_offset"):
            if isinstance(key, tuple) and len(key) == 2:
                return key
        elif isinstance(key, str):
            return (key,)
        raise VllmApiError(
            f"vLLM gave the block extra key {key!r}, which the table does not expect"
        )

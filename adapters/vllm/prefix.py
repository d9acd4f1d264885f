"""vLLM's prefix-cache block hashing with multimodal extra keys
(``vllm/v1/core/kv_cache_utils.py``) behind ``spec.components.BlockHasher``.

``request_block_hashes`` builds a vLLM ``Request`` with the request block hasher the
engine core installs (``get_request_block_hasher(block_size, get_hash_fn_by_name(
"sha256"))`` after ``init_none_hash``): vLLM's constructor hashes the prompt's full
blocks into ``request.block_hashes``, which are returned as hex strings.
``block_extra_keys`` is vLLM's ``generate_block_hash_extra_keys`` for one block.

Key format (rows ``mm_extra_key_offset``/``mm_extra_key_tag`` of
:mod:`adapters.vllm.versions`): the spec's ``(mm_hash, offset - start)`` is vLLM's pair
before 0.33 and its ``("mm", mm_hash, offset - start)`` since; a vLLM that keys a block
by ``mm_hash`` alone (0.11) gives ``(mm_hash,)`` — there is no offset to report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spec.types import MultiModalItem

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

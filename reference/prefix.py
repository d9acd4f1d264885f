"""Prefix-cache block hashing with multimodal extra keys (SPEC.md PFX-1..6).

Prefix caching keys KV blocks by content. Image placeholders expand to the same dummy
token ids whatever the pixels, so a block hash over token ids alone would let user B's
request reuse the KV computed from user A's photo. Each block therefore also mixes in an
*extra key* per multimodal item overlapping it: ``(mm_hash, offset - block_start)``.
The relative offset keeps two placements of the same image inside otherwise identical
placeholder blocks apart (PFX-6), and every block the item touches carries it, not only
the block where it starts (PFX-3).

Hashes chain: ``hash_i = H(hash_{i-1}, tokens_i, extra_keys_i)``, so a block's hash
identifies the whole prefix up to and including it (PFX-1, PFX-4, PFX-5). ``H`` is
SHA-256 over a framed serialization: every value is written with a type tag and its
length, so different (parent, tokens, keys) triples can never serialize to the same
bytes.

Mirrors vLLM ``vllm/v1/core/kv_cache_utils.py``: ``hash_block_tokens``,
``_gen_mm_extra_hash_keys``, ``generate_block_hash_extra_keys`` and
``get_request_block_hasher`` (which hashes full blocks only). Unlike vLLM, the parent of
block 0 is a fixed empty marker rather than a per-process random ``NONE_HASH``, so equal
inputs hash equal across instances too (PFX-2).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np

from spec.errors import InvalidInputError, InvalidRangeError
from spec.types import MultiModalItem

#: One extra key: the item's content hash and its offset relative to the block start
#: (negative when the item began in an earlier block).
ExtraKey = tuple[str, int]

#: The parent of block 0. A digest is 64 hex characters, so the empty string can never
#: be mistaken for the hash of a real block.
ROOT_PARENT = ""


def _frame(tag: bytes, payload: bytes) -> bytes:
    """A self-delimiting value: one tag byte, an 8-byte length, the payload."""
    return tag + len(payload).to_bytes(8, "big") + payload


def _frame_int(value: int) -> bytes:
    return _frame(b"i", str(value).encode("ascii"))


def _frame_str(value: str) -> bytes:
    return _frame(b"s", value.encode("utf-8"))


def _frame_list(parts: Iterable[bytes]) -> bytes:
    return _frame(b"l", b"".join(parts))


def hash_block_tokens(
    parent_block_hash: str, block_token_ids: Sequence[int], extra_keys: Sequence[ExtraKey]
) -> str:
    """SHA-256 (hex) of the framed triple ``(parent, tokens, extra_keys)`` (PFX-1)."""
    serialized = _frame_list(
        [
            _frame_str(parent_block_hash),
            _frame_list(_frame_int(t) for t in block_token_ids),
            _frame_list(_frame_list([_frame_str(h), _frame_int(o)]) for h, o in extra_keys),
        ]
    )
    return hashlib.sha256(serialized).hexdigest()


def _require_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidInputError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise InvalidInputError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _require_items(items: Sequence[MultiModalItem], prompt_length: int | None) -> None:
    for index, item in enumerate(items):
        if not isinstance(item, MultiModalItem):
            raise InvalidInputError(
                f"item {index} must be a MultiModalItem, got {type(item).__name__}"
            )
        if not isinstance(item.mm_hash, str) or not item.mm_hash:
            raise InvalidInputError(f"item {index} has no mm_hash (got {item.mm_hash!r})")
        if prompt_length is not None and item.mm_position.end > prompt_length:
            raise InvalidRangeError(
                f"item {index} ({item.mm_hash}) occupies [{item.mm_position.offset}, "
                f"{item.mm_position.end}), past the end of a {prompt_length}-token prompt"
            )


class BlockHasher:
    """Chained block hashes of a prompt with multimodal extra keys (PFX-1..6).

    Built from ``block_size`` (tokens per KV block). Only full blocks are hashed: the
    trailing partial block of a prompt has no hash, as in vLLM (it cannot be shared).
    """

    def __init__(self, block_size: int) -> None:
        self._block_size = _require_int("block_size", block_size, 1)

    @property
    def block_size(self) -> int:
        return self._block_size

    def block_extra_keys(
        self, items: Sequence[MultiModalItem], start_token_idx: int, end_token_idx: int
    ) -> tuple[ExtraKey, ...]:
        """``(mm_hash, offset - start_token_idx)`` for every item whose range overlaps
        ``[start_token_idx, end_token_idx)``, in item order (PFX-3)."""
        start = _require_int("start_token_idx", start_token_idx, 0)
        end = _require_int("end_token_idx", end_token_idx, start)
        _require_items(items, None)
        return tuple(
            (item.mm_hash, item.mm_position.offset - start)
            for item in items
            if item.mm_position.offset < end and item.mm_position.end > start
        )

    def request_block_hashes(
        self, token_ids: Sequence[int], items: Sequence[MultiModalItem]
    ) -> list[str]:
        """One hash per full block of the prompt, each chained to its predecessor
        (PFX-1..6). Every item must lie inside the prompt."""
        tokens = [_require_int(f"token_ids[{i}]", token, 0) for i, token in enumerate(token_ids)]
        _require_items(items, len(tokens))
        hashes: list[str] = []
        parent = ROOT_PARENT
        for start in range(0, len(tokens) - self._block_size + 1, self._block_size):
            end = start + self._block_size
            parent = hash_block_tokens(
                parent, tokens[start:end], self.block_extra_keys(items, start, end)
            )
            hashes.append(parent)
        return hashes

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

The other kinds of identity a request carries (``PrefixIdentity``: the LoRA adapter,
the cache salt, prompt embeddings; PFX-7, PFX-8) are keys of their own, each *tagged* by
its kind: ``("lora", name, path)`` on every block, ``("salt", salt)`` on block 0 (the
chain carries it on), ``("embeds", digest of the block's rows)`` on every block; the
multimodal key is ``("mm", mm_hash, offset)`` in the hash. The tag is what keeps a
salt ``"x"`` from standing for an adapter named ``"x"`` (vLLM 0.33 tags its keys the
same way; 0.22.1 did not: docs/findings.md, V15).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np

from spec.errors import InvalidInputError, InvalidRangeError
from spec.types import MultiModalItem, PrefixIdentity

#: One extra key: the item's content hash and its offset relative to the block start
#: (negative when the item began in an earlier block).
ExtraKey = tuple[str, int]

#: A key as the hash frames it: the kind's tag, then its values.
TaggedKey = tuple[str | int, ...]

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


def _frame_value(value: str | int) -> bytes:
    return _frame_str(value) if isinstance(value, str) else _frame_int(value)


def hash_block_tokens(
    parent_block_hash: str,
    block_token_ids: Sequence[int],
    extra_keys: Sequence[ExtraKey],
    identity_keys: Sequence[TaggedKey] = (),
) -> str:
    """SHA-256 (hex) of the framed ``(parent, tokens, keys)`` (PFX-1): the block's
    multimodal keys tagged ``"mm"``, then its other identity keys (PFX-7)."""
    keys: list[TaggedKey] = [("mm", h, o) for h, o in extra_keys]
    keys += identity_keys
    serialized = _frame_list(
        [
            _frame_str(parent_block_hash),
            _frame_list(_frame_int(t) for t in block_token_ids),
            _frame_list(_frame_list(_frame_value(v) for v in key) for key in keys),
        ]
    )
    return hashlib.sha256(serialized).hexdigest()


def identity_keys(identity: PrefixIdentity, start: int, end: int) -> list[TaggedKey]:
    """The keys of the block ``[start, end)`` for every kind of identity but the
    multimodal one (PFX-7): the adapter on every block, the salt on block 0 (the chain
    carries it), the digest of the block's prompt-embedding rows (width and values as
    float32) on every block."""
    keys: list[TaggedKey] = []
    if identity.lora is not None:
        keys.append(("lora", identity.lora.name, identity.lora.path))
    if identity.salt is not None and start == 0:
        keys.append(("salt", identity.salt))
    if identity.prompt_embeds is not None:
        rows = np.asarray(identity.prompt_embeds[start:end], dtype=np.float32)
        digest = hashlib.sha256(repr(rows.shape).encode() + rows.tobytes()).hexdigest()
        keys.append(("embeds", digest))
    return keys


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
        return self.request_block_hashes_with(token_ids, items, PrefixIdentity())

    def identity_keys(
        self, identity: PrefixIdentity, start_token_idx: int, end_token_idx: int
    ) -> list[TaggedKey]:
        """The block's keys of every kind of identity but the multimodal one (PFX-7)."""
        return identity_keys(identity, start_token_idx, end_token_idx)

    def request_block_hashes_with(
        self,
        token_ids: Sequence[int],
        items: Sequence[MultiModalItem],
        identity: PrefixIdentity,
    ) -> list[str]:
        """The block hashes of a prompt that also carries ``identity`` (PFX-7, PFX-8):
        every kind of identity keys every block it concerns, tagged by its kind."""
        tokens = [_require_int(f"token_ids[{i}]", token, 0) for i, token in enumerate(token_ids)]
        _require_items(items, len(tokens))
        if not isinstance(identity, PrefixIdentity):
            raise InvalidInputError(
                f"identity must be a PrefixIdentity, got {type(identity).__name__}"
            )
        embeds = identity.prompt_embeds
        if embeds is not None and len(embeds) != len(tokens):
            raise InvalidInputError(
                f"{len(embeds)} prompt-embedding rows for a {len(tokens)}-token prompt"
            )
        hashes: list[str] = []
        parent = ROOT_PARENT
        for start in range(0, len(tokens) - self._block_size + 1, self._block_size):
            end = start + self._block_size
            parent = hash_block_tokens(
                parent,
                tokens[start:end],
                self.block_extra_keys(items, start, end),
                self.identity_keys(identity, start, end),
            )
            hashes.append(parent)
        return hashes

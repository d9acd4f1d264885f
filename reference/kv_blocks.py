"""KV blocks with prefix caching for the reference engine loop (vLLM's ``BlockPool`` in
miniature, ``vllm/v1/core/block_pool.py``): an LRU free queue, block hashes kept until
a block is reused, and, per block slot, what its KV was computed from (SYS-6) and at
which weights version (SYS-12)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from spec.components import KVSource
from spec.errors import InvalidInputError


class KVBlockPool:
    """KV blocks with prefix caching (vLLM ``BlockPool`` in miniature).

    A block is *free* when no request references it; free blocks wait in an LRU queue
    (``free_queue``, oldest first) and may still be *cached* (``cached``: block hash ->
    block) until they are reused, which evicts their hash. ``sources`` keeps, per block
    slot, what the position's KV was computed from (SYS-6): a prefix hit shares the
    physical block, so it shares what it was computed from.
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.block_size = block_size
        self.ref_cnt = [0] * num_blocks
        self.block_hash: list[str | None] = [None] * num_blocks
        self.free_queue: OrderedDict[int, None] = OrderedDict((b, None) for b in range(num_blocks))
        self.cached: dict[str, int] = {}
        self.sources: list[list[KVSource | None]] = [[None] * block_size for _ in range(num_blocks)]
        #: per block slot, the weights version its KV was computed at (SYS-12)
        self.versions: list[list[int]] = [[0] * block_size for _ in range(num_blocks)]
        #: per block, whether a hybrid model's recurrent state after the block's last
        #: position was written to its slot (a chunk ended there: SYS-16)
        self.has_state = [False] * num_blocks

    @property
    def num_free(self) -> int:
        return len(self.free_queue)

    @property
    def num_in_use(self) -> int:
        return sum(1 for count in self.ref_cnt if count > 0)

    def longest_cached_prefix(self, block_hashes: Sequence[str], max_blocks: int) -> list[int]:
        """The cached blocks of the longest prefix of ``block_hashes`` (at most
        ``max_blocks``), stopping at the first miss (``KVCacheManager.get_computed_blocks``)."""
        hits: list[int] = []
        for block_hash in block_hashes[:max_blocks]:
            block = self.cached.get(block_hash)
            if block is None:
                break
            hits.append(block)
        return hits

    def touch(self, blocks: Sequence[int]) -> None:
        """Reference blocks of a prefix hit (taking free ones out of the free queue)."""
        for block in blocks:
            if self.ref_cnt[block] == 0:
                del self.free_queue[block]
            self.ref_cnt[block] += 1

    def allocate(self, count: int) -> list[int]:
        """``count`` fresh blocks from the front of the free queue; a cached one loses
        its hash (it is about to be overwritten)."""
        if count > self.num_free:
            raise InvalidInputError(f"{count} KV blocks requested, {self.num_free} free")
        blocks: list[int] = []
        for _ in range(count):
            block, _none = self.free_queue.popitem(last=False)
            stale = self.block_hash[block]
            if stale is not None:
                del self.cached[stale]
                self.block_hash[block] = None
            self.sources[block] = [None] * self.block_size
            self.has_state[block] = False
            self.ref_cnt[block] = 1
            blocks.append(block)
        return blocks

    def free(self, blocks: Sequence[int]) -> None:
        """Release a request's blocks; the tail is queued first, so it is reused first."""
        for block in reversed(blocks):
            self.ref_cnt[block] -= 1
            if self.ref_cnt[block] == 0:
                self.free_queue[block] = None

    def reset_prefix_cache(self) -> bool:
        """Drop every block hash, so that nothing computed so far is hit again; only
        when no block is in use (``BlockPool.reset_prefix_cache``)."""
        if self.num_in_use:
            return False
        self.cached.clear()
        self.block_hash = [None] * len(self.block_hash)
        return True

    def cache(self, block: int, block_hash: str) -> None:
        """Make a full, computed block findable by its hash (first writer wins)."""
        if block_hash not in self.cached and self.block_hash[block] is None:
            self.cached[block_hash] = block
            self.block_hash[block] = block_hash

"""An embedding that can never be cached empties SGLang's embedding cache (finding S7).

``.venv-sglang/bin/python adapters/sglang/repro_oversized_evicts.py TREE`` (TREE: an
unpacked release, adapters/sglang/fetch.py) runs SGLang's own cache alone: a cache of 16
bytes (``MultiModalStaticCache`` since 0.5.22, ``MultiModalCache`` in 0.5.3) holding one
8-byte embedding is asked to keep a 24-byte one, larger than the whole budget, and prints
what the cache holds afterwards. Exit 1 when the refused embedding evicted the held one
(0.5.3, 0.5.22), 0 when the cache still holds it (0.5.23 refuses before evicting:
"An uncacheable video must not evict useful entries on every chunk").
"""

from __future__ import annotations

import sys


def main(tree: str) -> int:
    sys.path.insert(0, tree)
    import torch
    from sglang.srt.mem_cache import multimodal_cache as cache_module

    held, huge = torch.zeros(1, 2), torch.zeros(3, 2)  # 8 and 24 bytes of float32
    if hasattr(cache_module, "MultiModalStaticCache"):
        cache = cache_module.MultiModalStaticCache(16)
        cache.set(1, cache_module.EmbeddingResult(embedding=held))
        admitted = cache.set(2, cache_module.EmbeddingResult(embedding=huge))
    else:
        cache = cache_module.MultiModalCache(16)
        cache.put(1, held)
        admitted = cache.put(2, huge)
    kept = list(cache.mm_cache)
    print(f"a cache of 16 bytes holding item 1 (8 bytes) is asked to keep item 2 (24 bytes): "
          f"admitted={admitted}; it now holds items {kept}")
    if 1 not in kept:
        print("THE REFUSED EMBEDDING EMPTIED THE CACHE")
        return 1
    print("item 1 is still held")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    raise SystemExit(main(sys.argv[1]))

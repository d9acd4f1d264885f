"""Two images, one radix key: SGLang before 0.5.23 keys an image by ``hash % 2**30``.

``.venv-sglang/bin/python adapters/sglang/repro_pad_collision.py TREE`` (TREE: an
unpacked release, adapters/sglang/fetch.py) runs SGLang's own code alone: it builds the
two images ``pfx_no_aliasing_by_search`` found (each a 1x32 uint8 pixel array) as SGLang
items, lets ``MultimodalDataItem.set_pad_value`` hash them and derive their pad values,
pads a two-token image prompt for each with the padding pattern SGLang's models use, and
asks SGLang's ``RadixCache``, holding image A's prompt, how much of image B's prompt it
has cached. 0.5.3 and 0.5.22: the whole of it (exit 1). 0.5.23: nothing (exit 0).
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from typing import Any

import numpy as np

#: The two images the search found (``search_image(0xc4fe)``, ``search_image(0xe2f1)``).
IMAGES = ("search-00c4fe", "search-00e2f1")
IMAGE_TOKEN_ID = 151655  # Qwen2-VL's <|image_pad|>; any id works


def pixels(name: str) -> np.ndarray[Any, np.dtype[np.uint8]]:
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return np.frombuffer(digest, dtype=np.uint8).reshape(1, 32).copy()


def main(tree: str) -> int:
    sys.path.insert(0, tree)
    from sglang.srt.managers import mm_utils, schedule_batch
    from sglang.srt.mem_cache import radix_cache

    keys = []
    for name in IMAGES:
        item = schedule_batch.MultimodalDataItem(modality=schedule_batch.Modality.IMAGE)
        item.feature = pixels(name)
        item.offsets = [(0, 1)]
        item.set_pad_value()
        inputs = schedule_batch.MultimodalInputs(mm_items=[item], im_token_id=IMAGE_TOKEN_ID)
        pattern = mm_utils.MultiModalityDataPaddingPatternMultimodalTokens()
        key = [int(t) for t in pattern.pad_input_tokens(array("q", [IMAGE_TOKEN_ID] * 2), inputs)]
        print(f"{name}: pixels {pixels(name).tobytes().hex()}")
        print(f"  SGLang hash {item.hash:#018x}, pad value {item.pad_value}, radix key {key}")
        keys.append(key)
    cached = _cached_prefix(radix_cache, keys[0], keys[1])
    print(f"radix cache holding image A's prompt has {cached} of image B's {len(keys[1])} tokens")
    return 1 if cached else 0


def _cached_prefix(radix_cache: Any, held: list[int], asked: list[int]) -> int:
    """How many leading tokens of ``asked`` SGLang's radix tree matches after inserting
    ``held`` (0.5.22 and later: params objects and int64 arrays; 0.5.3: lists)."""
    cls = radix_cache.RadixCache
    if hasattr(cls, "create_simulated"):
        tree = cls.create_simulated()
        key = radix_cache.RadixKey
        tree.insert(radix_cache.InsertParams(key=key(token_ids=array("q", held))))
        match = tree.match_prefix(
            radix_cache.MatchPrefixParams(key=key(token_ids=array("q", asked)))
        )
    else:
        tree = cls(req_to_token_pool=None, token_to_kv_pool_allocator=None, page_size=1)
        tree.insert(radix_cache.RadixKey(list(held)))
        match = tree.match_prefix(radix_cache.RadixKey(list(asked)))
    if hasattr(match, "device_prefix_len"):
        return int(match.device_prefix_len)
    return len(match.device_indices)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    raise SystemExit(main(sys.argv[1]))

"""A client's item hash takes another image's identity: SGLang reuses a dict item's ``hash``.

``.venv-sglang/bin/python adapters/sglang/repro_client_hash.py TREE`` (TREE: an unpacked
release, adapters/sglang/fetch.py) runs SGLang's own code alone. Image A is an item as
SGLang's processor builds it — its ``feature`` hashed by ``set_pad_value`` — and a client
sends image B, other pixels, as a ``processor_output`` dict that carries A's hash (anyone
who has A and the model's processor can compute it): the dict goes through the release's
``BaseMultimodalProcessor.collect_mm_items_from_processor_output`` (called with the two
tables it reads of its processor) and ``set_pad_value``, as on arrival. It prints both
items' hash and pad value.

Exit 1 when B gets A's hash (then A's pad value, so A's radix key, and A's key of the
embedding cache); 0 when B keeps an identity of its own. 0.5.22 and 0.5.23: B takes A's
(``resolve_multimodal_item_hash``: "if exists, reuse"); 0.5.3 reads no ``hash`` from a
dict item. The reproducer of finding S8 (SPEC.md HASH-11; docs/sglang.md).
"""

from __future__ import annotations

import sys
from types import SimpleNamespace


def main(tree: str) -> int:
    sys.path.insert(0, tree)
    import torch
    from sglang.srt.managers import schedule_batch
    from sglang.srt.multimodal.processors.base_processor import BaseMultimodalProcessor

    image = schedule_batch.Modality.IMAGE
    a = schedule_batch.MultimodalDataItem(modality=image)
    a.feature = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    a.offsets = [(0, 1)]
    a.set_pad_value()
    tables = SimpleNamespace(FEATURE_NAMES=[], ATTR_NAME_TO_MODALITY={"feature": image})
    sent = {"feature": torch.full((3, 4), 7.0), "hash": int(a.hash), "modality": "image"}
    (b,) = BaseMultimodalProcessor.collect_mm_items_from_processor_output(tables, sent)
    b.set_pad_value()
    print(f"image A (processed by SGLang): hash {int(a.hash):#018x}, pad value {a.pad_value}")
    print(f"image B (other pixels, sent with A's hash): hash {int(b.hash):#018x}, "
          f"pad value {b.pad_value}")
    if int(b.hash) == int(a.hash):
        print("B TAKES A'S IDENTITY: one radix key, one embedding-cache entry")
        return 1
    print("B keeps an identity of its own")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: repro_client_hash.py TREE (an unpacked SGLang release)")
    sys.exit(main(sys.argv[1]))

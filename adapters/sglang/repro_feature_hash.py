"""Different processed features, one identity: SGLang's ``hash_feature`` hashes bytes only.

``.venv-sglang/bin/python adapters/sglang/repro_feature_hash.py TREE`` (TREE: an unpacked
release, adapters/sglang/fetch.py) runs SGLang's own code alone. It builds SGLang items
(``MultimodalDataItem``) whose ``feature`` — the processor's output, what SGLang keys an
item by when the item carries no hash of its own — differs between two items of a pair,
lets ``set_pad_value`` hash them (``hash_feature``, through
``resolve_multimodal_item_hash`` in 0.5.23) and prints both items' hash and pad value:

- the same elements in another shape (``(6, 4)`` against ``(4, 6)``, float32);
- the same bytes as another dtype (float32 against their int32 view);
- a list of tensors split at another place (``[t[:2], t[2:]]`` against ``[t[:1], t[1:]]``).

Exit 1 when a pair gets one hash (then one pad value, so one radix key, and one key of
the embedding cache); 0 when every pair is told apart. 0.5.3, 0.5.22 and 0.5.23: all
three pairs collide. Reported upstream as sgl-project/sglang#25462 (closed by the stale
bot, unfixed) with the fix proposed in #22033 (closed unmerged). The reproducer of
finding S6 (SPEC.md HASH-10; docs/sglang.md).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def pairs(torch: Any) -> list[tuple[str, Any, Any]]:
    elements = np.arange(24, dtype=np.float32)
    split = torch.arange(6, dtype=torch.float32)
    return [
        ("shape (6, 4) vs (4, 6)", elements.reshape(6, 4), elements.reshape(4, 6)),
        ("float32 vs its int32 view", elements[:6].copy(), elements[:6].view(np.int32)),
        ("[t[:2], t[2:]] vs [t[:1], t[1:]]", [split[:2], split[2:]], [split[:1], split[1:]]),
    ]


def identity(schedule_batch: Any, feature: Any) -> tuple[int, Any]:
    item = schedule_batch.MultimodalDataItem(modality=schedule_batch.Modality.IMAGE)
    item.feature = feature
    item.offsets = [(0, 1)]
    item.set_pad_value()
    return int(item.hash), item.pad_value


def main(tree: str) -> int:
    sys.path.insert(0, tree)
    import torch
    from sglang.srt.managers import schedule_batch

    collided = 0
    for what, first, second in pairs(torch):
        (hash_a, pad_a), (hash_b, pad_b) = identity(schedule_batch, first), identity(
            schedule_batch, second
        )
        same = hash_a == hash_b
        collided += same
        print(f"{what}: hash {hash_a:#018x} / {hash_b:#018x}, pad value {pad_a} / {pad_b}: "
              + ("ONE IDENTITY" if same else "told apart"))
    print(f"{collided} of 3 pairs of different features share one identity")
    return 1 if collided else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    raise SystemExit(main(sys.argv[1]))

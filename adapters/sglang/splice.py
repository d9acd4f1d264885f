"""SGLang's splice behind ``spec.components.Splice`` (SPEC.md SPL; docs/sglang.md).

``embed_mm_inputs`` (``sglang/srt/managers/mm_utils.py``, 0.5.22 and later) does two
things per modality once the item embeddings are concatenated in placeholder order:
``mm_schedule._adjust_embedding_length(embedding, num_mm_tokens, logger)`` and then
``mm_utils._scatter_mm_embedding(dest=input_embeds, mask=mask, src=embedding)``, the
mask a ``[num_tokens, 1]`` column. ``merge`` calls those two functions in that order on
CPU tensors, with the count of selected positions as ``num_mm_tokens``.

- ``_adjust_embedding_length`` raises ``RuntimeError("Insufficient multimodal embedding
  length: ...")`` when there are fewer rows than positions: reported as the spec's
  ``SpliceCountError`` with SGLang's message unchanged (SPL-3 judges the message).
  Given more rows, it keeps the *last* ones: returned as it is, for SPL-3/SPL-4 to judge.
- On that path it reads ``get_schedule().chunked_prefill_size`` only to choose whether to
  log a second warning; outside a server no config is published, so the adapter gives
  ``mm_schedule`` a ``get_schedule`` answering SGLang's default, 8192 (chunked prefill on).
  Its warnings go to a silent logger of the adapter's: they are not behaviour a clause
  judges.
- No ``inject``: SGLang has no marker-injection path (its prompts are expanded by the
  processor before the splice), so the splice lacks that optional capability
  (``spec.components.InjectingSplice``) and SPL-5 and DIFF-2 are ``not provided``.

0.5.3 assigns inline inside ``embed_mm_inputs`` (``inputs_embeds[indices] = embedding``):
no function to call, so the splice is not provided there (:func:`available`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from spec.errors import SpliceCountError

#: SGLang's ``ServerArgs.chunked_prefill_size`` default when none is given for the model.
CHUNKED_PREFILL_SIZE = 8192
_INSUFFICIENT = "Insufficient multimodal embedding length"
_SILENT = logging.getLogger("mmspec.sglang.splice")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


def available(mm_utils: ModuleType, mm_schedule: ModuleType | None) -> bool:
    """True when the release has both functions ``embed_mm_inputs`` calls (0.5.22+)."""
    return (
        hasattr(mm_utils, "_scatter_mm_embedding")
        and mm_schedule is not None
        and hasattr(mm_schedule, "_adjust_embedding_length")
    )


class SglangSplice:
    """``_adjust_embedding_length`` then ``_scatter_mm_embedding``, as ``embed_mm_inputs``."""

    def __init__(self, mm_utils: ModuleType, mm_schedule: ModuleType) -> None:
        self._scatter = mm_utils._scatter_mm_embedding
        self._adjust = mm_schedule._adjust_embedding_length
        schedule = SimpleNamespace(chunked_prefill_size=CHUNKED_PREFILL_SIZE)
        # setattr: the name is SGLang's module global, looked up at call time.
        setattr(mm_schedule, "get_schedule", lambda: schedule)  # noqa: B010

    def merge(
        self,
        inputs_embeds: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[Any]:
        dest = torch.from_numpy(np.array(inputs_embeds))
        mask = torch.from_numpy(np.array(is_multimodal, dtype=bool)).unsqueeze(-1)
        if len(mm_embeds) == 0:
            # embed_mm_inputs skips a modality with no items: nothing is scattered.
            untouched: NDArray[Any] = dest.numpy()
            return untouched
        embedding = torch.cat([torch.from_numpy(np.array(e)) for e in mm_embeds])
        try:
            embedding = self._adjust(embedding, int(mask.sum().item()), _SILENT)
        except RuntimeError as e:
            if str(e).startswith(_INSUFFICIENT):
                raise SpliceCountError(str(e)) from e
            raise
        self._scatter(dest=dest, mask=mask, src=embedding)
        out: NDArray[Any] = dest.numpy()
        return out

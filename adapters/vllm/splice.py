"""vLLM's ``_merge_multimodal_embeddings`` behind ``spec.components.Splice``.

``merge`` hands vLLM's function torch tensors made from the numpy arrays (a copy of
``inputs_embeds``, which vLLM overwrites in place) and returns its result as numpy.
vLLM raises ``ValueError("Attempted to assign ... placeholders")`` on a row-count
mismatch; that error is reported as the spec's ``SpliceCountError`` with vLLM's message
unchanged (SPL-3 judges the message). Whatever else vLLM does — an early return, a
broadcast — is returned as it is, for the properties to judge.

vLLM has no injection path (the seed article's "replace each marker by its image's
rows"). ``inject`` lays the prompt out as injection would — each marker row repeated
once per row of its image, the repeats marked multimodal — and lets vLLM's merge fill
them: the layout is the adapter's, every value written is vLLM's (docs/vllm.md).

bfloat16 crosses the boundary as ``uint16`` bit patterns (``merge_bfloat16`` and
``inject_bfloat16``, the differential properties' extension): vLLM's merge then runs
on bfloat16 tensors, as in a bfloat16 model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from spec.errors import MarkerCountError, SpliceCountError

from .versions import VllmCode

_COUNT_MESSAGE = "Attempted to assign"


class VllmSplice:
    """``vllm.model_executor.models.utils._merge_multimodal_embeddings`` on CPU tensors."""

    def __init__(self, code: VllmCode) -> None:
        utils = code.module("models_utils")
        self._merge_fn: Callable[..., Any] = utils._merge_multimodal_embeddings

    # --- the Protocol ----------------------------------------------------------------

    def merge(
        self,
        inputs_embeds: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[Any]:
        out = self._merge(torch.from_numpy(np.array(inputs_embeds)), mm_embeds, is_multimodal)
        return out.numpy()

    def inject(
        self,
        input_ids: Sequence[int],
        text_embeds: NDArray[Any],
        visual_tokens: Sequence[NDArray[Any]],
        marker_id: int,
    ) -> NDArray[Any]:
        out = self._inject(input_ids, torch.from_numpy(np.array(text_embeds)), visual_tokens,
                           marker_id)
        return out.numpy()

    # --- bfloat16, as uint16 bit patterns --------------------------------------------

    def merge_bfloat16(
        self,
        inputs_bits: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[Any]:
        return _bits(self._merge(_bfloat16(inputs_bits), mm_embeds, is_multimodal))

    def inject_bfloat16(
        self,
        input_ids: Sequence[int],
        text_bits: NDArray[Any],
        visual_tokens: Sequence[NDArray[Any]],
        marker_id: int,
    ) -> NDArray[Any]:
        return _bits(self._inject(input_ids, _bfloat16(text_bits), visual_tokens, marker_id))

    # --- helpers ---------------------------------------------------------------------

    def _merge(
        self,
        inputs: torch.Tensor,
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> torch.Tensor:
        embeddings = [torch.from_numpy(np.array(e)) for e in mm_embeds]
        mask = torch.from_numpy(np.array(is_multimodal, dtype=bool))
        return self._call(inputs, embeddings, mask)

    def _call(
        self, inputs: torch.Tensor, embeddings: list[torch.Tensor], mask: torch.Tensor
    ) -> torch.Tensor:
        try:
            out: torch.Tensor = self._merge_fn(inputs, embeddings, mask)
        except ValueError as e:
            if str(e).startswith(_COUNT_MESSAGE):
                raise SpliceCountError(str(e)) from e
            raise
        return out

    def _inject(
        self,
        input_ids: Sequence[int],
        text: torch.Tensor,
        visual_tokens: Sequence[NDArray[Any]],
        marker_id: int,
    ) -> torch.Tensor:
        ids = [int(token) for token in input_ids]
        markers = [position for position, token in enumerate(ids) if token == marker_id]
        if len(markers) != len(visual_tokens):
            raise MarkerCountError(
                f"input_ids have {len(markers)} markers (id {marker_id}) "
                f"but {len(visual_tokens)} images were given"
            )
        if len(ids) != text.shape[0]:
            raise ValueError(f"text_embeds has {text.shape[0]} rows for {len(ids)} input ids")
        embeddings = [torch.from_numpy(np.array(v)) for v in visual_tokens]
        # The injection layout: every marker row repeated once per row of its image.
        repeats = torch.ones(len(ids), dtype=torch.long)
        for position, rows in zip(markers, embeddings, strict=True):
            repeats[position] = int(rows.shape[0])
        laid_out = torch.repeat_interleave(text, repeats, dim=0)
        is_marker = torch.zeros(len(ids), dtype=torch.bool)
        is_marker[markers] = True
        mask = torch.repeat_interleave(is_marker, repeats, dim=0)
        return self._call(laid_out, embeddings, mask)


def _bfloat16(bits: NDArray[Any]) -> torch.Tensor:
    return torch.from_numpy(np.array(bits, dtype=np.uint16).view(np.int16)).view(torch.bfloat16)


def _bits(tensor: torch.Tensor) -> NDArray[Any]:
    return tensor.contiguous().view(torch.int16).numpy().view(np.uint16)

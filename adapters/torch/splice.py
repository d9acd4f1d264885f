"""The splice and the seed article's injection in torch (SPL-1..5, DIFF-1..3).

:func:`splice_` is vLLM's ``_merge_multimodal_embeddings`` on device tensors — an
in-place masked assignment ``inputs_embeds[is_multimodal] = concat(mm_embeds)`` — but
the row count is checked *before* the assignment, so a single row is never broadcast
over several placeholders and an empty list with placeholders is an error (SPL-4); the
error carries the upstream message (SPL-3). Each item is cast to the input's dtype
before concatenation (no detour through a promoted dtype), rounding once
(:func:`adapters.torch.device.cast_rounding_once`).

:func:`inject` is the article's ``MultiImageInjector.inject_multiple``: each marker row
replaced by its own image's rows (SPL-5: equal to expanding the prompt and splicing).
:func:`multimodal_mask` builds ``is_multimodal`` from placeholder ranges, honouring
``is_embed``.

:class:`TorchSplice` is the numpy-boundary component; bfloat16 crosses the boundary as
``uint16`` bit patterns through ``merge_bfloat16`` and ``inject_bfloat16``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from spec.errors import InvalidInputError, MarkerCountError, SpliceCountError
from spec.types import PlaceholderRange

from .device import (
    DEVICE,
    NUMPY_FLOATS,
    cast_rounding_once,
    from_bits,
    to_bits,
    to_device,
    to_numpy,
)

# --- on device tensors ------------------------------------------------------------------


def count_error(row_counts: Sequence[int], num_placeholders: int) -> SpliceCountError:
    """The upstream message: ``Attempted to assign 3 + 2 = 5 multimodal tokens to 4
    placeholders`` (SPL-3)."""
    expr = " + ".join(str(n) for n in row_counts) or "0"
    return SpliceCountError(
        f"Attempted to assign {expr} = {sum(row_counts)} multimodal tokens to "
        f"{num_placeholders} placeholders"
    )


def splice_(
    inputs_embeds: torch.Tensor,
    mm_embeds: Sequence[torch.Tensor],
    is_multimodal: torch.Tensor,
) -> torch.Tensor:
    """Overwrite, in place, the rows of ``inputs_embeds`` where ``is_multimodal`` is
    True with the rows of ``mm_embeds`` in order, cast to its dtype; returns it.

    Counting the mask is a device-to-host sync when the mask is on the GPU (upstream
    avoids it by keeping the mask on the CPU; so can the caller)."""
    row_counts = [int(e.shape[0]) for e in mm_embeds]
    num_placeholders = int(is_multimodal.sum().item())
    if sum(row_counts) != num_placeholders:
        raise count_error(row_counts, num_placeholders)
    if num_placeholders == 0:
        return inputs_embeds
    flat = torch.cat([cast_rounding_once(e, inputs_embeds.dtype) for e in mm_embeds])
    inputs_embeds[is_multimodal.to(inputs_embeds.device)] = flat.to(inputs_embeds.device)
    return inputs_embeds


def inject(
    input_ids: torch.Tensor,
    text_embeds: torch.Tensor,
    visual_tokens: Sequence[torch.Tensor],
    marker_id: int,
) -> torch.Tensor:
    """A new tensor: ``text_embeds`` with each ``marker_id`` row replaced by the rows of
    the corresponding ``visual_tokens`` entry, cast to its dtype (SPL-5). Raises
    ``MarkerCountError`` when markers and images differ in number."""
    positions = (input_ids == marker_id).nonzero(as_tuple=True)[0].tolist()
    if len(positions) != len(visual_tokens):
        raise MarkerCountError(
            f"input_ids have {len(positions)} markers (id {marker_id}) "
            f"but {len(visual_tokens)} images were given"
        )
    pieces: list[torch.Tensor] = []
    previous_end = 0
    for position, tokens in zip(positions, visual_tokens, strict=True):
        if position > previous_end:
            pieces.append(text_embeds[previous_end:position])
        pieces.append(cast_rounding_once(tokens, text_embeds.dtype).to(text_embeds.device))
        previous_end = position + 1
    if previous_end < len(text_embeds):
        pieces.append(text_embeds[previous_end:])
    if not pieces:
        return text_embeds.clone()
    return torch.cat(pieces)


def multimodal_mask(
    num_positions: int, ranges: Sequence[PlaceholderRange], device: torch.device = DEVICE
) -> torch.Tensor:
    """``is_multimodal`` for a prompt of ``num_positions``: True on every placeholder
    position that takes an embedding — all of a range, or where its ``is_embed`` says."""
    mask = torch.zeros(num_positions, dtype=torch.bool)
    for placeholder in ranges:
        if placeholder.end > num_positions:
            raise InvalidInputError(
                f"range {placeholder} does not fit a prompt of {num_positions} positions"
            )
        if placeholder.is_embed is None:
            mask[placeholder.offset : placeholder.end] = True
        else:
            mask[placeholder.offset : placeholder.end] = torch.tensor(placeholder.is_embed)
    return mask.to(device)


# --- the numpy boundary -----------------------------------------------------------------


def _matrix(name: str, value: object) -> NDArray[Any]:
    if not isinstance(value, np.ndarray):
        raise InvalidInputError(f"{name} must be a numpy array, got {type(value).__name__}")
    array: NDArray[Any] = value
    if array.ndim != 2:
        raise InvalidInputError(f"{name} must be 2-D (rows, hidden), got shape {array.shape}")
    return array


def _float_matrix(name: str, value: object) -> NDArray[Any]:
    array = _matrix(name, value)
    if array.dtype not in NUMPY_FLOATS:
        raise InvalidInputError(
            f"{name} has dtype {array.dtype}; the torch splice takes float16, float32 or "
            "float64 arrays (bfloat16 as uint16 bit patterns through merge_bfloat16)"
        )
    return array


def _embeddings(name: str, embeddings: object, hidden_size: int) -> list[NDArray[Any]]:
    if not isinstance(embeddings, (list, tuple)):
        raise InvalidInputError(
            f"{name} must be a list of 2-D arrays, got {type(embeddings).__name__}"
        )
    checked = []
    for index, embedding in enumerate(embeddings):
        array = _float_matrix(f"{name}[{index}]", embedding)
        if array.shape[1] != hidden_size:
            raise InvalidInputError(
                f"{name}[{index}] has hidden size {array.shape[1]}, expected {hidden_size}"
            )
        checked.append(array)
    return checked


def _mask(value: object, num_rows: int) -> NDArray[np.bool_]:
    if not isinstance(value, np.ndarray):
        raise InvalidInputError(
            f"is_multimodal must be a numpy bool array, got {type(value).__name__}"
        )
    mask: NDArray[Any] = value
    if mask.dtype != np.bool_ or mask.ndim != 1:
        raise InvalidInputError(
            f"is_multimodal must be a 1-D bool array, got dtype {mask.dtype} "
            f"and shape {mask.shape}"
        )
    if len(mask) != num_rows:
        raise InvalidInputError(
            f"is_multimodal has {len(mask)} entries for {num_rows} rows of inputs_embeds"
        )
    return mask


def _input_ids(input_ids: object, marker_id: object, num_rows: int) -> list[int]:
    if isinstance(input_ids, (str, bytes)) or not isinstance(input_ids, (list, tuple)):
        raise InvalidInputError(
            f"input_ids must be a list or tuple of ints, got {type(input_ids).__name__}"
        )
    for position, token in enumerate(input_ids):
        if isinstance(token, (bool, np.bool_)) or not isinstance(token, (int, np.integer)):
            raise InvalidInputError(
                f"input_ids position {position}: token ids must be ints, "
                f"got {type(token).__name__}"
            )
    if isinstance(marker_id, bool) or not isinstance(marker_id, int):
        raise InvalidInputError(f"marker_id must be an int, got {type(marker_id).__name__}")
    if num_rows != len(input_ids):
        raise InvalidInputError(f"text_embeds has {num_rows} rows for {len(input_ids)} input ids")
    return [int(token) for token in input_ids]


_INT64 = range(-(2**63), 2**63)


def _ids_tensor(ids: list[int], marker_id: int) -> tuple[torch.Tensor, int]:
    """The ids as a device tensor, with the marker to look for. Python ints may exceed
    int64; then only "is it the marker" matters, so the ids become 1 (marker) or 0."""
    if marker_id in _INT64 and all(token in _INT64 for token in ids):
        return torch.tensor(ids, dtype=torch.int64).to(DEVICE), marker_id
    flags = [int(token == marker_id) for token in ids]
    return torch.tensor(flags, dtype=torch.int64).to(DEVICE), 1


class TorchSplice:
    """``spec.components.Splice`` on :data:`~adapters.torch.device.DEVICE`, plus the
    bfloat16 extension of the differential properties. Inputs are never modified."""

    def merge(
        self,
        inputs_embeds: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[Any]:
        """Masked rows replaced by the rows of ``mm_embeds`` (SPL-1..4)."""
        inputs = _float_matrix("inputs_embeds", inputs_embeds)
        result = self._merge(to_device(inputs), inputs.shape[1], mm_embeds, is_multimodal)
        return to_numpy(result)

    def merge_bfloat16(
        self,
        inputs_bits: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[np.uint16]:
        """:meth:`merge` in bfloat16: ``inputs_bits`` and the result are ``uint16`` bit
        patterns; ``mm_embeds`` are float arrays rounded to bfloat16 (nearest-even)."""
        inputs = _matrix("inputs_bits", inputs_bits)
        result = self._merge(from_bits(inputs), inputs.shape[1], mm_embeds, is_multimodal)
        return to_bits(result)

    def inject(
        self,
        input_ids: Sequence[int],
        text_embeds: NDArray[Any],
        visual_tokens: Sequence[NDArray[Any]],
        marker_id: int,
    ) -> NDArray[Any]:
        """Each marker row replaced by its image's rows (SPL-5)."""
        text = _float_matrix("text_embeds", text_embeds)
        result = self._inject(input_ids, to_device(text), text.shape, visual_tokens, marker_id)
        return to_numpy(result)

    def inject_bfloat16(
        self,
        input_ids: Sequence[int],
        text_bits: NDArray[Any],
        visual_tokens: Sequence[NDArray[Any]],
        marker_id: int,
    ) -> NDArray[np.uint16]:
        """:meth:`inject` in bfloat16, bit patterns in and out like
        :meth:`merge_bfloat16`."""
        text = _matrix("text_bits", text_bits)
        result = self._inject(input_ids, from_bits(text), text.shape, visual_tokens, marker_id)
        return to_bits(result)

    def _merge(
        self,
        inputs: torch.Tensor,
        hidden_size: int,
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> torch.Tensor:
        embeddings = _embeddings("mm_embeds", mm_embeds, hidden_size)
        mask = _mask(is_multimodal, inputs.shape[0])
        # The mask stays on the host: counting it costs no device sync (as upstream).
        return self._merge_tensors(
            inputs, [to_device(e) for e in embeddings], torch.from_numpy(mask)
        )

    def _merge_tensors(
        self, inputs: torch.Tensor, embeddings: list[torch.Tensor], mask: torch.Tensor
    ) -> torch.Tensor:
        return splice_(inputs, embeddings, mask)

    def _inject_tensors(
        self, ids: torch.Tensor, text: torch.Tensor, images: list[torch.Tensor], marker_id: int
    ) -> torch.Tensor:
        return inject(ids, text, images, marker_id)

    def _inject(
        self,
        input_ids: Sequence[int],
        text: torch.Tensor,
        shape: tuple[int, ...],
        visual_tokens: Sequence[NDArray[Any]],
        marker_id: int,
    ) -> torch.Tensor:
        ids = _input_ids(input_ids, marker_id, shape[0])
        images = _embeddings("visual_tokens", visual_tokens, shape[1])
        ids_tensor, marker = _ids_tensor(ids, marker_id)
        return self._inject_tensors(ids_tensor, text, [to_device(i) for i in images], marker)

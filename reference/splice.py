"""The splice (SPL-1..5): image embeddings replace placeholder rows of the prompt's
token embeddings.

``merge`` is vLLM's ``_merge_multimodal_embeddings``
(``inputs_embeds[is_multimodal] = concat(mm_embeds)``) without its defects: it never
broadcasts a single row over several placeholders, and an empty embedding list with
selected positions is an error, not a no-op (SPL-4). ``inject`` is the seed article's
injection, replacing each marker row by its image's rows (SPL-5).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spec.errors import InvalidInputError, MarkerCountError, SpliceCountError


def _check_matrix(name: str, value: object) -> NDArray[Any]:
    if not isinstance(value, np.ndarray):
        raise InvalidInputError(f"{name} must be a numpy array, got {type(value).__name__}")
    array: NDArray[Any] = value
    if array.ndim != 2:
        raise InvalidInputError(f"{name} must be 2-D (rows, hidden), got shape {array.shape}")
    return array


def _check_embeddings(name: str, embeddings: object, hidden_size: int) -> list[NDArray[Any]]:
    if not isinstance(embeddings, (list, tuple)):
        raise InvalidInputError(
            f"{name} must be a list of 2-D arrays, got {type(embeddings).__name__}"
        )
    checked: list[NDArray[Any]] = []
    for index, embedding in enumerate(embeddings):
        array = _check_matrix(f"{name}[{index}]", embedding)
        if array.shape[1] != hidden_size:
            raise InvalidInputError(
                f"{name}[{index}] has hidden size {array.shape[1]}, expected {hidden_size}"
            )
        checked.append(array)
    return checked


class Splice:
    """``spec.components.Splice``. Both operations return a new array; the inputs are
    never modified."""

    def merge(
        self,
        inputs_embeds: NDArray[Any],
        mm_embeds: Sequence[NDArray[Any]],
        is_multimodal: NDArray[Any],
    ) -> NDArray[Any]:
        """Rows where ``is_multimodal`` is True replaced, in order, by the rows of
        ``mm_embeds`` cast to ``inputs_embeds.dtype`` (SPL-1, SPL-2); a count mismatch
        raises ``SpliceCountError`` with the upstream message (SPL-3, SPL-4)."""
        inputs = _check_matrix("inputs_embeds", inputs_embeds)
        embeddings = _check_embeddings("mm_embeds", mm_embeds, inputs.shape[1])
        if not isinstance(is_multimodal, np.ndarray):
            raise InvalidInputError(
                f"is_multimodal must be a numpy bool array, got {type(is_multimodal).__name__}"
            )
        mask: NDArray[Any] = is_multimodal
        if mask.dtype != np.bool_ or mask.ndim != 1:
            raise InvalidInputError(
                f"is_multimodal must be a 1-D bool array, got dtype {mask.dtype} "
                f"and shape {mask.shape}"
            )
        if len(mask) != len(inputs):
            raise InvalidInputError(
                f"is_multimodal has {len(mask)} entries for {len(inputs)} rows of inputs_embeds"
            )
        num_rows = sum(len(e) for e in embeddings)
        num_placeholders = int(mask.sum())
        if num_rows != num_placeholders:
            expr = " + ".join(str(len(e)) for e in embeddings) or "0"
            raise SpliceCountError(
                f"Attempted to assign {expr} = {num_rows} multimodal tokens to "
                f"{num_placeholders} placeholders"
            )
        merged = inputs.copy()
        if num_rows:
            # Cast each item before concatenating: no detour through a promoted dtype.
            merged[mask] = np.concatenate([e.astype(inputs.dtype) for e in embeddings])
        return merged

    def inject(
        self,
        input_ids: Sequence[int],
        text_embeds: NDArray[Any],
        visual_tokens: Sequence[NDArray[Any]],
        marker_id: int,
    ) -> NDArray[Any]:
        """Each ``marker_id`` row of ``text_embeds`` replaced by the rows of the
        corresponding ``visual_tokens`` entry, cast to its dtype (SPL-5). Raises
        ``MarkerCountError`` when markers and images differ in number."""
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
        text = _check_matrix("text_embeds", text_embeds)
        if len(text) != len(input_ids):
            raise InvalidInputError(
                f"text_embeds has {len(text)} rows for {len(input_ids)} input ids"
            )
        images = _check_embeddings("visual_tokens", visual_tokens, text.shape[1])
        num_markers = sum(1 for token in input_ids if token == marker_id)
        if num_markers != len(images):
            raise MarkerCountError(
                f"input_ids have {num_markers} markers (id {marker_id}) "
                f"but {len(images)} images were given"
            )
        pieces: list[NDArray[Any]] = []
        next_image = 0
        for position, token in enumerate(input_ids):
            if token == marker_id:
                pieces.append(images[next_image].astype(text.dtype))
                next_image += 1
            else:
                pieces.append(text[position : position + 1])
        if not pieces:
            return text.copy()
        return np.concatenate(pieces)

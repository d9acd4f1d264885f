"""The spec's request vocabulary in vLLM's own types.

vLLM's encoder cache manager, scheduling hook and block hasher take a
``vllm.v1.request.Request`` whose ``mm_features`` are ``MultiModalFeatureSpec``\\ s with
a ``vllm.multimodal.inputs.PlaceholderRange``. :class:`RequestBridge` builds exactly
those, with vLLM's constructors, from a :class:`spec.types.RequestView` — nothing of
vLLM's is re-implemented: ``get_num_encoder_embeds``, ``get_num_embeds`` and
``get_embeds_indices_in_range`` that the wrapped code calls are vLLM's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from spec.types import MultiModalItem, PlaceholderRange, RequestView

if TYPE_CHECKING:
    from .versions import VllmCode

#: The modality every item has here (the properties are about images).
MODALITY = "image"

#: The token id that fills prompts whose tokens the wrapped code never reads.
_FILLER_TOKEN = 0


def vllm_placeholder_range(code: VllmCode, placeholder: PlaceholderRange) -> Any:
    """vLLM's ``PlaceholderRange``; ``is_embed`` becomes the bool tensor vLLM expects."""
    mask = None
    if placeholder.is_embed is not None:
        mask = torch.tensor(placeholder.is_embed, dtype=torch.bool)
    return code.module("inputs").PlaceholderRange(
        offset=placeholder.offset, length=placeholder.length, is_embed=mask
    )


#: The one field of the processed data an engine's request carries (its content is
#: never read: the worker's toy encoder encodes the request's own image).
_DATA_FIELD = "mmspec_processed"


def processed_data(code: VllmCode) -> Any:
    """A ``MultiModalKwargsItem`` standing for an item's processed data: what the
    engine core's requests carry to the worker, and what the scheduler strips from an
    item the prefix cache covers (0.33.0 ``strip_covered_mm_data``)."""
    inputs = code.module("inputs")
    element = inputs.MultiModalFieldElem(
        data=torch.zeros(1, dtype=torch.uint8), field=inputs.MultiModalSharedField(batch_size=1)
    )
    return inputs.MultiModalKwargsItem({_DATA_FIELD: element})


def vllm_feature(code: VllmCode, item: MultiModalItem, data: Any = None) -> Any:
    """vLLM's ``MultiModalFeatureSpec`` for one item (by default no processed data: the
    cache manager, the hook and the hasher read only ``identifier`` and
    ``mm_position``; the engine's requests carry :func:`processed_data`)."""
    return code.module("inputs").MultiModalFeatureSpec(
        data=data,
        modality=MODALITY,
        identifier=item.mm_hash,
        mm_position=vllm_placeholder_range(code, item.mm_position),
    )


def vllm_request(
    code: VllmCode,
    request_id: str,
    token_ids: Sequence[int],
    items: Sequence[MultiModalItem],
    block_hasher: Callable[[Any], list[Any]] | None = None,
    **identity: Any,
) -> Any:
    """A ``vllm.v1.request.Request`` generating one token, built by vLLM's constructor
    (which also runs ``block_hasher`` over the prompt's full blocks, as the engine does).
    ``identity``: the constructor's ``lora_request``, ``cache_salt``, ``prompt_embeds``."""
    sampling_params = code.module("sampling_params").SamplingParams(max_tokens=1)
    return code.module("request").Request(
        request_id=request_id,
        prompt_token_ids=list(token_ids),
        sampling_params=sampling_params,
        pooling_params=None,
        mm_features=[vllm_feature(code, item) for item in items],
        block_hasher=block_hasher,
        **identity,
    )


class RequestBridge:
    """One vLLM ``Request`` per distinct :class:`RequestView` (same id and items), so
    repeated calls about the same request hand vLLM the same object, as the engine
    does."""

    def __init__(self, code: VllmCode) -> None:
        self._code = code
        self._requests: dict[RequestView, Any] = {}

    def __call__(self, view: RequestView) -> Any:
        request = self._requests.get(view)
        if request is None:
            prompt_len = max((item.mm_position.end for item in view.items), default=1)
            request = vllm_request(
                self._code, view.request_id, [_FILLER_TOKEN] * prompt_len, view.items
            )
            self._requests[view] = request
        return request


def probe_extra_key(code: VllmCode) -> object:
    """The multimodal extra key vLLM's ``_gen_mm_extra_hash_keys`` gives the block
    ``[0, 1)`` of a request with one item at offset 0 (its shape tells the key format)."""
    item = MultiModalItem("probe", PlaceholderRange(0, 1))
    request = vllm_request(code, "probe", [_FILLER_TOKEN], [item])
    keys, _ = code.module("kv_cache_utils")._gen_mm_extra_hash_keys(request, 0, 1, 0)
    if len(keys) != 1:
        raise RuntimeError(f"vLLM gave {keys!r} as the extra keys of a one-item block")
    key: object = keys[0]
    return key

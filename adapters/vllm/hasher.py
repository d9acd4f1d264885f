"""vLLM's ``MultiModalHasher`` behind ``spec.components.Hasher``.

An item's hash is what vLLM's processor computes for it
(``vllm/multimodal/processing``: ``hash_kwargs(model_id=..., <modality>=item,
**hf_processor_mm_kwargs)``): the data under its modality's key, the processor options
as further keyword arguments, and the model id. The algorithm is vLLM's default,
passed positionally since 0.33 (row ``hasher_algorithm_arg`` of
:mod:`adapters.vllm.versions`) and read from ``VLLM_MM_HASHER_ALGORITHM`` before.

``item_identifier`` (HASH-7, HASH-8's optional capability) is vLLM's own
``ProcessorInputs.get_mm_hashes`` for one image: the item in an
``ImageProcessorItems``, the request's uuid in ``mm_uuid_items``, the options as the
processor kwargs — so the uuid rules (verbatim without options, hashed with them) are
vLLM's, not restated here.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

from spec.types import HashInput

from .requests_bridge import MODALITY
from .versions import DEFAULT_MM_HASHER_ALGORITHM, Api, VllmCode

#: The model id every hash is taken under (a constant: the properties compare hashes of
#: one model).
MODEL_ID = "mmspec/vlm"


class VllmHasher:
    """``MultiModalHasher.hash_kwargs`` as vLLM's processor calls it
    (``ProcessorInputs.get_mm_hashes``)."""

    def __init__(self, code: VllmCode, api: Api) -> None:
        # ``api`` (row hasher_algorithm_arg) is read by get_mm_hashes itself: it passes
        # the algorithm on to hash_kwargs as its release expects.
        del api
        self._code = code

    def hash_item(self, data: HashInput, options: Mapping[str, HashInput] | None = None) -> str:
        # The processor's own route (ProcessorInputs.get_mm_hashes without a uuid): 0.22.1
        # spreads the options as keyword arguments of hash_kwargs (an option named like the
        # modality or "model_id" is a TypeError there, and here); 0.33 scopes them by
        # modality and nests them under "mm_processor_kwargs".
        return self.item_identifier(data, options, None)

    def item_identifier(
        self,
        data: HashInput | None,
        options: Mapping[str, HashInput] | None,
        uuid: str | None,
    ) -> str:
        inputs_module = self._code.module("mm_processing_inputs")
        items = self._code.module("mm_parse").ImageProcessorItems([data])
        inputs = inputs_module.ProcessorInputs(
            prompt=[0],
            mm_data_items=self._code.module("mm_parse").MultiModalDataItems({MODALITY: items}),
            mm_uuid_items={MODALITY: [uuid]},
            hf_processor_mm_kwargs=dict(options or {}),
        )
        # get_mm_hashes(model_id) before 0.33, get_mm_hashes(model_id, hash_algorithm) since
        parameters = inspect.signature(inputs.get_mm_hashes).parameters
        if len(parameters) > 1:
            hashes = inputs.get_mm_hashes(MODEL_ID, DEFAULT_MM_HASHER_ALGORITHM)
        else:
            hashes = inputs.get_mm_hashes(MODEL_ID)
        return str(hashes[MODALITY][0])

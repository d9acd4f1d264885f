"""A weightless multimodal model registered through vLLM's own plugin mechanism, so that
``Scheduler.__init__`` sizes its encoder budget and builds its encoder cache manager
itself (``MultiModalBudget`` -> ``compute_mm_encoder_budget`` -> ``create_manager``).

vLLM asks the model's processor, through ``MULTIMODAL_REGISTRY``, for the largest item
of each modality (``BaseProcessingInfo.get_mm_max_tokens_per_item``). Real processors
need Hugging Face image processors (torchvision) and a tokenizer; this one needs
neither: it declares ``requires_tokenizer = False`` (vLLM's own switch for processors
that run with ``skip_tokenizer_init``) and reads the largest item from its
``config.json`` (``mmspec_max_tokens_per_item``). The model class is registered with
``ModelRegistry.register_model`` as a class, so vLLM inspects it in-process (no
subprocess, no import by name); it is never instantiated — nothing loads weights — and
its methods raise if anything ever calls them. The machine's requests arrive already
expanded (the processor's work), so the processor's ``apply`` is never used either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from .versions import VllmCode

ARCHITECTURE = "MmspecToyForConditionalGeneration"

#: The ``config.json`` key the processor reads its largest item from.
MAX_TOKENS_KEY = "mmspec_max_tokens_per_item"

_registered: set[int] = set()


def _weightless(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError(f"{ARCHITECTURE} is weightless: only its processor info is used")


def register(code: VllmCode) -> None:
    """Register the model and its processor with the loaded vLLM (once per process)."""
    registry = code.module("model_registry").ModelRegistry
    if id(registry) in _registered:
        return
    processing = code.module("mm_processing")

    class ToyProcessingInfo(processing.BaseProcessingInfo):  # type: ignore[misc, name-defined]
        def get_supported_mm_limits(self) -> Mapping[str, int | None]:
            return {"image": None}

        def get_mm_max_tokens_per_item(
            self, seq_len: int, mm_counts: Mapping[str, int]
        ) -> Mapping[str, int]:
            return {"image": int(getattr(self.get_hf_config(), MAX_TOKENS_KEY))}

    class ToyDummyInputs(processing.BaseDummyInputsBuilder):  # type: ignore[misc, name-defined]
        get_dummy_text = _weightless
        get_dummy_mm_data = _weightless

    class ToyProcessor(processing.BaseMultiModalProcessor):  # type: ignore[misc, name-defined]
        requires_tokenizer = False
        _get_mm_fields_config = _weightless
        _get_prompt_updates = _weightless

    interfaces = code.module("models_interfaces")

    class ToyModel(nn.Module, interfaces.SupportsMultiModal):  # type: ignore[misc, name-defined]
        def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
            _weightless()

        @classmethod
        def get_placeholder_str(cls, modality: str, i: int) -> str:
            return "<image>"

        def embed_multimodal(self, **kwargs: object) -> Any:
            return _weightless()

        def embed_input_ids(self, input_ids: Any, *args: Any, **kwargs: Any) -> Any:
            return _weightless()

        def forward(
            self,
            input_ids: Any,
            positions: Any,
            intermediate_tensors: Any = None,
            inputs_embeds: Any = None,
            **kwargs: object,
        ) -> Any:
            return _weightless()

        def compute_logits(self, hidden_states: Any) -> Any:
            return _weightless()

    ToyModel.__name__ = ToyModel.__qualname__ = ARCHITECTURE
    registered = code.module("multimodal").MULTIMODAL_REGISTRY.register_processor(
        ToyProcessor, info=ToyProcessingInfo, dummy_inputs=ToyDummyInputs
    )(ToyModel)
    registry.register_model(ARCHITECTURE, registered)
    _registered.add(id(registry))


def config_json(max_tokens_per_item: int, max_model_len: int) -> dict[str, Any]:
    """The model's ``config.json``: a tiny llama text config under the toy architecture."""
    return {
        "architectures": [ARCHITECTURE],
        "model_type": "llama",
        "hidden_size": 8,
        "intermediate_size": 16,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "num_hidden_layers": 1,
        "vocab_size": 1024,
        "max_position_embeddings": max_model_len,
        "torch_dtype": "float32",
        MAX_TOKENS_KEY: max_tokens_per_item,
    }

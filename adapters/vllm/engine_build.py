"""vLLM's v1 ``Scheduler`` built from the machine's ``EngineConfig`` the way vLLM's engine
core builds it (``EngineCore.__init__`` / ``_initialize_kv_caches``), without weights,
a tokenizer, a GPU or a hub.

- **Model.** A tiny text-only llama ``config.json`` in a temporary directory;
  ``ModelConfig(model=<dir>, skip_tokenizer_init=True)``. vLLM inspects the model
  class in a subprocess, which must import the same vLLM: ``PYTHONPATH`` gets the tree
  first (once per process; the ``ModelConfig`` is reused, it is the slow part, ~8 s).
- **Budgets.** ``max_num_scheduled_tokens`` is the token budget (``max_num_batched_tokens``
  is at least :data:`MAX_NUM_SEQS`, which vLLM requires of it: the scheduler's token
  budget is ``max_num_scheduled_tokens`` when set). vLLM derives the encoder budget and
  cache size from ``max_num_batched_tokens`` (``init=False`` fields); they are set to
  the machine's after ``VllmConfig`` validated, before the budget is computed.
- **KV cache.** ``cache_config.num_gpu_blocks`` as the engine core sets it after
  profiling, and a ``KVCacheConfig`` of one ``FullAttentionSpec`` group with one block
  more than the machine's: vLLM's ``BlockPool`` keeps block 0 as its null block
  (:func:`machine_block_id` maps the rest back to ``0..num_kv_blocks - 1``).
- **The multimodal budget — the step that is not yet vLLM's own path.** A text-only
  model gives the ``Scheduler`` no ``MultiModalBudget`` (no processor to ask), so after
  construction the budget is computed by vLLM's own ``compute_mm_encoder_budget`` from
  the scheduler config and the model's largest item (:func:`max_tokens_per_item`), and
  the cache manager is built by vLLM's ``EncoderCacheManager.create_manager`` (0.33;
  the constructor in 0.22.1, row ``ecm_create_manager``), exactly the two lines
  ``Scheduler.__init__`` runs with a multimodal model. A weightless plugin model
  registered through vLLM's ``ModelRegistry`` and ``MULTIMODAL_REGISTRY`` would make
  that construction path vLLM's own (docs/vllm.md, "vLLM's Scheduler as the engine loop").
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import torch

from spec.types import EngineConfig

from .versions import Api, VllmCode

#: The scheduler's limit on running requests: more than the machine ever has unfinished
#: (``MAX_LIVE``), so that only the token budget, the encoder and the KV cache bind.
MAX_NUM_SEQS = 16

#: Longer than any prompt the machine admits plus its generated tokens: vLLM's own
#: length cap never binds (admission checks the KV cache instead, as the engine core
#: checks ``max_model_len`` against it at start-up).
MAX_MODEL_LEN = 4096

#: The modality of every item (the machine's items are images).
MODALITY = "image"

_TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "num_hidden_layers": 1,
    "vocab_size": 1024,
    "max_position_embeddings": MAX_MODEL_LEN,
    "torch_dtype": "float32",
}

_model_configs: dict[int, Any] = {}


def _model_config(code: VllmCode) -> Any:
    """One ``ModelConfig`` per loaded vLLM (its subprocess inspection is slow)."""
    key = id(code.module("config"))
    if key not in _model_configs:
        root = str(code.module("config").__file__).rsplit("/vllm/", 1)[0]
        path = os.environ.get("PYTHONPATH", "")
        if root not in path.split(os.pathsep):
            # vLLM inspects the model class in a subprocess that imports vllm by name
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, path) if p)
        directory = tempfile.mkdtemp(prefix="mmspec-tiny-llama-")
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(_TINY_LLAMA, f)
        _model_configs[key] = code.module("config").ModelConfig(
            model=directory,
            skip_tokenizer_init=True,
            max_model_len=MAX_MODEL_LEN,
            dtype="float32",
        )
    return _model_configs[key]


def max_tokens_per_item(config: EngineConfig) -> int:
    """What the model's processor would report as its largest item: the largest the
    machine admits (SYS-9 rejects larger ones, as vLLM's input processor rejects items
    its processor cannot produce), so that vLLM's budget is the machine's."""
    return max(1, min(config.encoder_compute_budget, config.encoder_cache_size))


@dataclass(frozen=True)
class BuiltScheduler:
    scheduler: Any
    vllm_config: Any


def build_scheduler(code: VllmCode, api: Api, config: EngineConfig) -> BuiltScheduler:
    """vLLM's ``Scheduler`` for ``config`` (validated by the caller)."""
    config_module = code.module("config")
    scheduler_config = config_module.SchedulerConfig(
        max_model_len=MAX_MODEL_LEN,
        is_encoder_decoder=False,
        max_num_batched_tokens=max(config.token_budget, MAX_NUM_SEQS),
        max_num_scheduled_tokens=config.token_budget,
        max_num_seqs=MAX_NUM_SEQS,
        enable_chunked_prefill=True,
        disable_chunked_mm_input=config.disable_chunked_mm_input,
    )
    cache_config = config_module.CacheConfig(
        block_size=config.block_size, enable_prefix_caching=config.enable_prefix_caching
    )
    num_blocks = config.num_kv_blocks + 1  # BlockPool's null block
    cache_config.num_gpu_blocks = num_blocks
    vllm_config = config_module.VllmConfig(
        model_config=_model_config(code),
        cache_config=cache_config,
        scheduler_config=scheduler_config,
        device_config=config_module.DeviceConfig(device="cpu"),
    )
    vllm_config.scheduler_config.max_num_encoder_input_tokens = config.encoder_compute_budget
    vllm_config.scheduler_config.encoder_cache_size = config.encoder_cache_size
    kv = code.module("kv_cache_interface")
    spec = kv.FullAttentionSpec(
        block_size=config.block_size, num_kv_heads=1, head_size=1, dtype=torch.float32
    )
    kv_cache_config = kv.KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[kv.KVCacheGroupSpec(["model.layers.0.self_attn.attn"], spec)],
    )
    scheduler = code.module("scheduler").Scheduler(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        structured_output_manager=code.module("structured_output").StructuredOutputManager(
            vllm_config
        ),
        block_size=config.block_size,
    )
    _install_mm_budget(code, api, scheduler, vllm_config, config)
    return BuiltScheduler(scheduler, vllm_config)


def _install_mm_budget(
    code: VllmCode, api: Api, scheduler: Any, vllm_config: Any, config: EngineConfig
) -> None:
    """What ``Scheduler.__init__`` does with a multimodal model's ``MultiModalBudget``:
    the budget from ``compute_mm_encoder_budget``, the manager from ``create_manager``."""
    ecm = code.module("encoder_cache_manager")
    budget, cache_size = ecm.compute_mm_encoder_budget(
        vllm_config.scheduler_config, {MODALITY: max_tokens_per_item(config)}
    )
    scheduler.max_num_encoder_input_tokens = budget
    if api.has("ecm_create_manager"):
        manager = ecm.EncoderCacheManager.create_manager(
            cache_size=cache_size, vllm_config=vllm_config
        )
    else:
        manager = ecm.EncoderCacheManager(cache_size=cache_size)
    scheduler.encoder_cache_manager = manager


def machine_block_id(block_id: int) -> int:
    """vLLM's block id (1.., 0 is the null block) as the machine counts (0..)."""
    return block_id - 1

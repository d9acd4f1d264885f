"""vLLM's v1 ``Scheduler`` built from the machine's ``EngineConfig`` the way vLLM's engine
core builds it (``EngineCore.__init__`` / ``_initialize_kv_caches``), without weights,
a tokenizer, a GPU or a hub.

- **Model.** The weightless multimodal plugin model of :mod:`adapters.vllm.toy_model`,
  registered through vLLM's ``ModelRegistry`` and ``MULTIMODAL_REGISTRY``, its
  ``config.json`` in a temporary directory; ``ModelConfig(model=<dir>,
  skip_tokenizer_init=True)``, one per largest-item size (cheap after the first).
- **Budgets.** ``max_num_scheduled_tokens`` is the token budget (``max_num_batched_tokens``
  is at least :data:`MAX_NUM_SEQS`, which vLLM requires of it: the scheduler's token
  budget is ``max_num_scheduled_tokens`` when set). vLLM derives the encoder budget and
  cache size from ``max_num_batched_tokens`` (``init=False`` fields); they are set to
  the machine's after ``VllmConfig`` validated, before the ``Scheduler`` reads them.
- **The multimodal budget is the Scheduler's own.** ``Scheduler.__init__`` builds a
  ``MultiModalBudget``, which asks the plugin's processor for its largest item
  (:func:`max_tokens_per_item`) and calls ``compute_mm_encoder_budget``; the cache
  manager comes from ``EncoderCacheManager.create_manager`` (0.33; the constructor in
  0.22.1) inside ``__init__``.
- **Drafter (SYS-13).** With ``num_speculative_tokens = k``, after validation, the
  config's ``speculative_config`` is :class:`EagleStandIn` (a real EAGLE config loads a
  draft model's from a hub); the ``Scheduler`` derives ``use_eagle`` and
  ``num_lookahead_tokens`` from it, checked after construction. Where ``schedule()``
  pads new decodes with placeholder drafts (:func:`pads_new_decodes`, 0.33.0) the
  runner stand-in verifies them like any draft (a ``-1`` is never accepted).
- **Async scheduling (SYS-15).** With ``async_scheduling`` the scheduler is vLLM's
  ``AsyncScheduler`` (same arguments); the engine loop keeps one ``SchedulerOutput``
  in flight.
- **Model runner V1.** The worker is V1's ``GPUModelRunner`` code
  (:mod:`adapters.vllm.runner`), so the scheduler is built for it, as
  ``VLLM_USE_V2_MODEL_RUNNER=0`` builds it (:func:`_for_runner`): 0.33.0 otherwise
  chooses V2 for this model, whose scheduler reinstalls a resumed request with its data
  and sends a rewound one's (``_get_encoder_input_updates``) — a protocol V1's runner
  does not read. 0.22.1 chooses V1 for it by itself. With the adapter's
  ``MMSPEC_VLLM_MODEL_RUNNER=v2`` the worker is V2's encoder cache
  (:mod:`adapters.vllm.runner_v2`) and the scheduler is built for V2
  (``VLLM_USE_V2_MODEL_RUNNER=1``).
- **KV cache.** ``cache_config.num_gpu_blocks`` as the engine core sets it after
  profiling, and a ``KVCacheConfig`` of one ``FullAttentionSpec`` group with one block
  more than the machine's: vLLM's ``BlockPool`` keeps block 0 as its null block
  (:func:`machine_block_id` maps the rest back to ``0..num_kv_blocks - 1``).
- **Hybrid model (SYS-16).** With ``mamba_block_aligned``, ``cache_config.mamba_cache_mode
  = "align"`` and a second group, one ``MambaSpec`` layer in ``"align"`` mode
  (``KVCacheConfig.has_mamba_layers``), which is what makes the ``Scheduler`` split
  chunks (``need_mamba_block_aligned_split``) and vLLM's ``MambaManager`` keep the
  states; its blocks come from the same pool, as in vLLM, and count among the blocks in
  use. No Mamba layer runs: the worker stand-in has no recurrent state (the states'
  placement is SYS-16's, judged from the chunks and the prefix hits).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from spec.types import EngineConfig

from . import toy_model
from .versions import VllmCode

#: The scheduler's limit on running requests: more than the machine ever has unfinished
#: (``MAX_LIVE``), so that only the token budget, the encoder and the KV cache bind.
MAX_NUM_SEQS = 16

#: Longer than any prompt the machine admits plus its generated tokens: vLLM's own
#: length cap never binds (admission checks the KV cache instead, as the engine core
#: checks ``max_model_len`` against it at start-up).
MAX_MODEL_LEN = 4096

_model_configs: dict[tuple[int, int], Any] = {}


def _model_config(code: VllmCode, max_item: int) -> Any:
    """The plugin model's ``ModelConfig`` whose processor reports ``max_item`` as its
    largest item (one per loaded vLLM and size)."""
    key = (id(code.module("config")), max_item)
    if key not in _model_configs:
        toy_model.register(code)
        directory = tempfile.mkdtemp(prefix="mmspec-toy-model-")
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(toy_model.config_json(max_item, MAX_MODEL_LEN), f)
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
class EagleStandIn:
    """What vLLM reads of a ``SpeculativeConfig`` for an EAGLE drafter of ``k`` tokens,
    with the real config's defaults: a real one would load a draft model's config from
    a hub. 0.22.1's ``Scheduler.__init__`` reads ``num_speculative_tokens``,
    ``use_eagle()`` and ``uses_draft_model()`` (scheduler.py:211-220); 0.33.0 reads them
    through ``VllmConfig``'s properties (config/vllm.py:612-692: ``use_dflash()``,
    ``use_dspark()``, ``use_multi_module_mtp()``, ``use_eagle_block_drop()``,
    ``disable_lookahead_block_hashes``) and in ``__init__``/``schedule()``
    (``num_speculative_tokens_per_batch_size``, ``needs_eagle_block_drop()``,
    ``disable_eagle_block_drop``, ``max_num_new_slots_for_drafting``, 0 for EAGLE;
    ``parallel_drafting``, which decides for the V2 model runner).
    The scheduler derives ``use_eagle`` (the hook's shift of 1), ``num_lookahead_tokens
    = k`` and, in 0.33.0 with prefix caching, lookahead block hashes of 1 token from
    it, as from the real one. An attribute a release reads beyond these raises
    ``AttributeError`` (the frozen dataclass has no others): the engine machines
    then report its clauses not provided, naming the attribute."""

    num_speculative_tokens: int
    method: str = "eagle"
    num_speculative_tokens_per_batch_size: None = None
    disable_eagle_block_drop: bool = False
    disable_lookahead_block_hashes: bool = False
    max_num_new_slots_for_drafting: int = 0
    parallel_drafting: bool = False

    def use_eagle(self) -> bool:
        return True

    def uses_draft_model(self) -> bool:
        return False

    def use_dflash(self) -> bool:
        return False

    def use_dspark(self) -> bool:
        return False

    def use_multi_module_mtp(self) -> bool:
        return False

    def needs_eagle_block_drop(self) -> bool:
        return True

    def use_eagle_block_drop(self) -> bool:
        return not self.disable_eagle_block_drop


def pads_new_decodes(code: VllmCode) -> bool:
    """Whether the release's ``schedule()`` pads a new decode to ``1 + k`` placeholder
    drafts of ``-1`` (0.33.0: said in the report header)."""
    return "pad_spec_decode" in inspect.getsource(code.module("scheduler").Scheduler.schedule)


@dataclass(frozen=True)
class BuiltScheduler:
    scheduler: Any
    vllm_config: Any


#: The environment variable by which a deployment chooses its model runner.
_RUNNER_V2_ENV = "VLLM_USE_V2_MODEL_RUNNER"


@contextlib.contextmanager
def _for_runner(v2: bool) -> Iterator[None]:
    """vLLM reads the model-runner choice from the environment (``VllmConfig.
    use_v2_model_runner``) and the scheduler keeps it from its construction: set while
    it is built, then restored (the adapter runs inside its caller's process)."""
    before = os.environ.get(_RUNNER_V2_ENV)
    os.environ[_RUNNER_V2_ENV] = "1" if v2 else "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ[_RUNNER_V2_ENV]
        else:
            os.environ[_RUNNER_V2_ENV] = before


def build_scheduler(
    code: VllmCode, config: EngineConfig, runner_v2: bool = False
) -> BuiltScheduler:
    """vLLM's ``Scheduler`` for ``config``, built for model runner V1 (or V2)."""
    with _for_runner(runner_v2):
        built = _build_scheduler(code, config)
    if bool(getattr(built.scheduler, "use_v2_model_runner", False)) != runner_v2:
        raise AssertionError(
            f"vLLM's Scheduler was not built for model runner {'V2' if runner_v2 else 'V1'}"
        )
    return built


def runner_v2_refusal(code: VllmCode) -> str | None:
    """Why this release cannot build a ``Scheduler`` for model runner V2 here (None: it
    can): vLLM's own config validation, tried on the default engine config — 0.22.1's
    ``VllmConfig._validate_v2_model_runner`` requires Triton, which a CPU build lacks."""
    try:
        build_scheduler(code, EngineConfig(), runner_v2=True)
    except ValueError as error:  # pydantic's ValidationError is one
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        said = [line for line in lines if line.startswith("Value error")] or lines[:1]
        detail = said[0].split(" [type=")[0] if said else type(error).__name__
        return f"vLLM's VllmConfig refuses model runner V2 here: {detail}"
    return None


def _build_scheduler(code: VllmCode, config: EngineConfig) -> BuiltScheduler:
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
        block_size=config.block_size, enable_prefix_caching=config.enable_prefix_caching,
        mamba_cache_mode="align" if config.mamba_block_aligned else "none",
    )
    num_blocks = config.num_kv_blocks + 1  # BlockPool's null block
    cache_config.num_gpu_blocks = num_blocks
    vllm_config = config_module.VllmConfig(
        model_config=_model_config(code, max_tokens_per_item(config)),
        cache_config=cache_config,
        scheduler_config=scheduler_config,
        device_config=config_module.DeviceConfig(device="cpu"),
    )
    vllm_config.scheduler_config.max_num_encoder_input_tokens = config.encoder_compute_budget
    vllm_config.scheduler_config.encoder_cache_size = config.encoder_cache_size
    if config.num_speculative_tokens:
        # after validation, as the engine core's config would arrive (EagleStandIn)
        object.__setattr__(
            vllm_config, "speculative_config", EagleStandIn(config.num_speculative_tokens)
        )
    kv = code.module("kv_cache_interface")
    spec = kv.FullAttentionSpec(
        block_size=config.block_size, num_kv_heads=1, head_size=1, dtype=torch.float32
    )
    groups = [kv.KVCacheGroupSpec(["model.layers.0.self_attn.attn"], spec)]
    if config.mamba_block_aligned:
        mamba = kv.MambaSpec(
            block_size=config.block_size, shapes=((1,),), dtypes=(torch.float32,),
            mamba_cache_mode="align",
        )
        groups.append(kv.KVCacheGroupSpec(["model.layers.1.mixer"], mamba))
    kv_cache_config = kv.KVCacheConfig(
        num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups
    )
    if config.async_scheduling:
        # read by the scheduler only with pipeline parallelism and by the engine core's
        # batch queue: set after validation, like the encoder budgets
        vllm_config.scheduler_config.async_scheduling = True
    scheduler_class = (
        code.module("async_scheduler").AsyncScheduler
        if config.async_scheduling
        else code.module("scheduler").Scheduler
    )
    scheduler = scheduler_class(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        structured_output_manager=code.module("structured_output").StructuredOutputManager(
            vllm_config
        ),
        block_size=config.block_size,
    )
    if config.mamba_block_aligned and not scheduler.need_mamba_block_aligned_split:
        raise AssertionError("vLLM's Scheduler does not split chunks for the Mamba group")
    if config.num_speculative_tokens and not (
        scheduler.use_eagle and scheduler.num_lookahead_tokens == config.num_speculative_tokens
    ):
        raise AssertionError("vLLM's Scheduler did not take the EAGLE stand-in's drafter")
    return BuiltScheduler(scheduler, vllm_config)


#: vLLM's ``BlockPool`` null block, which stands in block tables for skipped blocks.
NULL_BLOCK_ID = 0


def machine_block_id(block_id: int) -> int:
    """vLLM's block id (1.., 0 is the null block) as the machine counts (0..)."""
    return block_id - 1

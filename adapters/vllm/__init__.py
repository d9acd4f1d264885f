"""The vLLM adapter: vLLM's own code behind the spec's interfaces — never a
re-implementation (docs/vllm.md).

vLLM is imported from ``$MMSPEC_VLLM_SRC`` when set (a git checkout or an unpacked
release tree; ``--vllm-src`` on the command line, ``make verify-vllm VLLM_SRC=...``),
else from the installed ``vllm`` (:mod:`adapters.vllm.source`). Interface differences
between releases are translated from one table (:mod:`adapters.vllm.versions`).

=======================  ===============================================================
component                vLLM code
=======================  ===============================================================
encoder_cache_manager    ``vllm.v1.core.encoder_cache_manager.EncoderCacheManager``
encoder_decoder_cache_   ``vllm.v1.core.encoder_cache_manager.EncoderDecoderCacheManager``
manager                  (the cross-attention models'; not provided by a release
                         without the class)
scheduling_hook          ``Scheduler._try_schedule_encoder_inputs`` (on a ``Scheduler``
                         shell), ``compute_mm_encoder_budget``
hasher                   ``vllm.multimodal.hasher.MultiModalHasher.hash_kwargs``
splice                   ``vllm.model_executor.models.utils._merge_multimodal_embeddings``
block_hasher             ``vllm.v1.core.kv_cache_utils``: ``get_request_block_hasher``,
                         ``generate_block_hash_extra_keys``
item_cache               ``vllm.multimodal.cache``: the LRU sender/receiver pair, or with
                         ``$MMSPEC_VLLM_PROCESSOR_CACHE=shm`` the shared-memory pair
                         (:mod:`adapters.vllm.item_cache_shm`)
worker_store             ``vllm.v1.worker.gpu_model_runner.GPUModelRunner``:
                         ``_process_encoder_cache_scheduler_output`` (0.33.0),
                         ``_execute_mm_encoder``, ``_gather_mm_embeddings`` on a runner
                         built without ``__init__`` (:mod:`adapters.vllm.runner`); or
                         with ``$MMSPEC_VLLM_MODEL_RUNNER=v2`` model runner V2's
                         ``EncoderCache`` and ``EncoderRunner``
                         (:mod:`adapters.vllm.runner_v2`)
engine_loop              ``vllm.v1.core.sched.scheduler.Scheduler`` (``schedule``,
                         ``update_from_output``, ``finish_requests``,
                         ``_preempt_request``), a model-runner stand-in answering each
                         ``SchedulerOutput`` (:mod:`adapters.vllm.engine`)
=======================  ===============================================================

``PlaceholderRange``, ``MultiModalFeatureSpec`` and ``Request`` are vLLM's own types,
built by vLLM's constructors from the spec's values (:mod:`adapters.vllm.requests_bridge`).
Not provided: the processor (vLLM's need a model's Hugging Face configuration), the toy
encoder (not vLLM's).
A component whose vLLM module does not import (the release lacks it, or a package its
import chain needs is missing) is not provided either, with the reason on stderr.

Without vLLM, importing this package raises :class:`~adapters.vllm.source.
VllmUnavailableError` (a ``ModuleNotFoundError``) whose message is one line.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from harness.declared import (
    MODEL_RUNNER_VARIABLE,
    PROCESSOR_CACHE_VARIABLE,
    DeclarationError,
    active_variant,
    setting,
)
from spec.adapter import Adapter
from spec.types import SchedulerConfig

from .source import VllmSource, VllmSourceError, VllmUnavailableError, load_vllm
from .versions import ROWS_BY_COMPONENT, Api, VllmApiError, VllmCode, resolve_api

#: vLLM module per role.
MODULES: dict[str, str] = {
    "request": "vllm.v1.request",
    "inputs": "vllm.multimodal.inputs",
    "sampling_params": "vllm.sampling_params",
    "encoder_cache_manager": "vllm.v1.core.encoder_cache_manager",
    "scheduler": "vllm.v1.core.sched.scheduler",
    "async_scheduler": "vllm.v1.core.sched.async_scheduler",
    "hasher": "vllm.multimodal.hasher",
    "models_utils": "vllm.model_executor.models.utils",
    "kv_cache_utils": "vllm.v1.core.kv_cache_utils",
    "hashing": "vllm.utils.hashing",
    "utils": "vllm.utils",
    "config": "vllm.config",
    "kv_cache_interface": "vllm.v1.kv_cache_interface",
    "structured_output": "vllm.v1.structured_output",
    "outputs": "vllm.v1.outputs",
    "model_registry": "vllm.model_executor.models.registry",
    "models_interfaces": "vllm.model_executor.models.interfaces",
    "multimodal": "vllm.multimodal",
    "mm_processing": "vllm.multimodal.processing",
    "lora_request": "vllm.lora.request",
    "mm_parse": "vllm.multimodal.parse",
    "mm_processing_inputs": "vllm.multimodal.processing.inputs",
    "mm_cache": "vllm.multimodal.cache",
    "engine_core": "vllm.v1.engine.core",
    "gpu_model_runner": "vllm.v1.worker.gpu_model_runner",
    "v2_encoder_cache": "vllm.v1.worker.gpu.mm.encoder_cache",
    "v2_encoder_runner": "vllm.v1.worker.gpu.mm.encoder_runner",
    "v2_model_state": "vllm.v1.worker.gpu.model_states.interface",
    "v2_model_runner": "vllm.v1.worker.gpu.model_runner",
}

_REQUEST_ROLES = ("request", "inputs", "sampling_params")

#: The roles each component needs (``hashing``/``utils``: see row hash_fn_module).
ROLES_BY_COMPONENT: dict[str, tuple[str, ...]] = {
    "encoder_cache_manager": (*_REQUEST_ROLES, "encoder_cache_manager"),
    "encoder_decoder_cache_manager": (*_REQUEST_ROLES, "encoder_cache_manager"),
    "scheduling_hook": (*_REQUEST_ROLES, "encoder_cache_manager", "scheduler"),
    "hasher": ("hasher", "mm_parse", "mm_processing_inputs"),
    "splice": ("models_utils",),
    "block_hasher": (*_REQUEST_ROLES, "kv_cache_utils"),
    "item_cache": ("inputs", "config", "mm_cache"),
    "worker_store": ("inputs", "gpu_model_runner"),
    "engine_loop": (
        *_REQUEST_ROLES,
        "encoder_cache_manager",
        "scheduler",
        "kv_cache_utils",
        "config",
        "kv_cache_interface",
        "structured_output",
        "outputs",
        "model_registry",
        "models_interfaces",
        "multimodal",
        "mm_processing",
    ),
}


def _import_code() -> VllmCode:
    """Import every module the adapter wraps. A missing module (the release lacks it,
    or a third-party package of its import chain is not installed) is recorded; any
    other failure — vLLM's own code raising at import — propagates."""
    modules: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for role, name in MODULES.items():
        try:
            modules[role] = importlib.import_module(name)
        except ModuleNotFoundError as e:
            modules[role] = None
            errors[role] = f"importing {name} failed: No module named {e.name!r}"
    return VllmCode(modules=modules, errors=errors)


#: The roles and version rows that replace a component's with model runner V2
#: (``$MMSPEC_VLLM_MODEL_RUNNER=v2``: :mod:`adapters.vllm.runner_v2`).
ROLES_ON_RUNNER_V2: dict[str, tuple[str, ...]] = {
    "worker_store": (
        "inputs", "v2_encoder_cache", "v2_encoder_runner", "v2_model_state", "v2_model_runner"
    ),
}
ROWS_ON_RUNNER_V2: dict[str, tuple[str, ...]] = {"worker_store": ("runner_v2_encode_method",)}


def _roles(component: str) -> tuple[str, ...]:
    """The roles ``component`` needs in this run (its model runner's)."""
    if MODEL_RUNNER == "v2" and component in ROLES_ON_RUNNER_V2:
        return ROLES_ON_RUNNER_V2[component]
    return ROLES_BY_COMPONENT[component]


def _rows(component: str) -> tuple[str, ...]:
    """The :mod:`adapters.vllm.versions` rows ``component`` reads in this run."""
    if MODEL_RUNNER == "v2" and component in ROWS_ON_RUNNER_V2:
        return ROWS_ON_RUNNER_V2[component]
    return ROWS_BY_COMPONENT[component]


def _missing_roles(code: VllmCode, component: str) -> list[str]:
    roles = list(_roles(component))
    if component in ("block_hasher", "engine_loop") and not code.has("hashing"):
        roles.append("utils")
    return [role for role in roles if not code.has(role)]


def _build(source: VllmSource, code: VllmCode) -> tuple[Adapter, dict[str, str], dict[str, Api]]:
    from .cache import VllmEncoderCacheManager
    from .encdec_cache import VllmEncoderDecoderCacheManager, has_encoder_decoder_cache
    from .engine import engine_loop_factory
    from .hasher import VllmHasher
    from .hook import VllmSchedulingHook
    from .item_cache import VllmItemCache
    from .item_cache_shm import VllmShmItemCache
    from .prefix import VllmBlockHasher
    from .runner import VllmWorkerStore
    from .runner_v2 import VllmV2WorkerStore
    from .splice import VllmSplice

    reasons: dict[str, str] = {}
    apis: dict[str, Api] = {}
    for component in ROLES_BY_COMPONENT:
        missing = _missing_roles(code, component)
        if missing:
            reasons[component] = "; ".join(code.errors[role] for role in missing)
            continue
        if component == "encoder_decoder_cache_manager" and not has_encoder_decoder_cache(code):
            reasons[component] = (
                f"{MODULES['encoder_cache_manager']} has no EncoderDecoderCacheManager"
            )
            continue
        apis[component] = resolve_api(source, code, _rows(component))

    if MODEL_RUNNER == "v2" and "engine_loop" in apis:
        from .engine_build import runner_v2_refusal

        refusal = runner_v2_refusal(code)
        if refusal is not None:
            reasons["engine_loop"] = refusal
            del apis["engine_loop"]

    def provided(component: str, factory: Callable[..., Any]) -> Callable[..., Any] | None:
        return factory if component in apis else None

    def scheduling_hook(config: SchedulerConfig) -> VllmSchedulingHook:
        return VllmSchedulingHook(code, apis["scheduling_hook"], config)

    adapter = Adapter(
        name=source.describe(),
        encoder_cache_manager=provided(
            "encoder_cache_manager", lambda size: VllmEncoderCacheManager(code, size)
        ),
        encoder_decoder_cache_manager=provided(
            "encoder_decoder_cache_manager",
            lambda size: VllmEncoderDecoderCacheManager(code, size),
        ),
        scheduling_hook=provided("scheduling_hook", scheduling_hook),
        hasher=provided("hasher", lambda: VllmHasher(code, apis["hasher"])),
        splice=provided("splice", lambda: VllmSplice(code)),
        block_hasher=provided(
            "block_hasher", lambda size: VllmBlockHasher(code, apis["block_hasher"], size)
        ),
        item_cache=provided(
            "item_cache",
            (lambda capacity: VllmShmItemCache(code, capacity))
            if PROCESSOR_CACHE == "shm"
            else (lambda capacity: VllmItemCache(code, capacity)),
        ),
        worker_store=provided(
            "worker_store",
            (lambda: VllmV2WorkerStore(code, apis["worker_store"]))
            if MODEL_RUNNER == "v2"
            else (lambda: VllmWorkerStore(code, apis["worker_store"])),
        ),
        engine_loop=(
            engine_loop_factory(code, apis["engine_loop"], MODEL_RUNNER == "v2")
            if "engine_loop" in apis
            else None
        ),
        implemented_by={
            "engine_loop": _engine_loop_modes(code) if "engine_loop" in apis else "",
            "worker_store": _WORKER_STORE[MODEL_RUNNER] if "worker_store" in apis else "",
            "item_cache": _ITEM_CACHE[PROCESSOR_CACHE] if "item_cache" in apis else "",
        },
    )
    return adapter, reasons, apis


#: What the report header says of each pair (adapters/vllm/item_cache*.py).
_ITEM_CACHE = {
    "lru": (
        "vLLM's LRU processor cache pair (mm_processor_cache_type='lru', the default): "
        "the API process's sender shadow and the engine core's receiver; stand-in: the "
        "model config handing over vLLM's MultiModalConfig"
    ),
    "shm": (
        "vLLM's shared-memory processor cache pair (mm_processor_cache_type='shm'): "
        "ShmObjectStoreSenderCache, the writer of a ring in /dev/shm, and the worker's "
        "ShmObjectStoreReceiverCache; stand-ins: the VllmConfig (world_size 1, vLLM's "
        "MultiModalConfig), the worker lock, a segment name per pair, the ring scaled "
        "to the serialised items (adapters/vllm/item_cache_shm.py)"
    ),
}


def chosen(variable: str, known: dict[str, str]) -> str:
    """The value ``variable`` names (its default when unset), one of ``known``'s keys."""
    value = setting(variable)
    if value not in known:
        raise VllmSourceError(f"{variable}={value!r}: choose one of {', '.join(known)}")
    return value


#: What the report header says of the worker store, per model runner
#: (adapters/vllm/runner.py, adapters/vllm/runner_v2.py).
_WORKER_STORE = {
    "v1": "vLLM's GPUModelRunner (vllm.v1.worker.gpu_model_runner, model runner V1, the "
    "Scheduler built for it: VLLM_USE_V2_MODEL_RUNNER=0): its encoder_cache through "
    "_execute_mm_encoder (which encodes only the inputs whose data reached the worker: "
    "_batch_mm_inputs_from_scheduler over the mm_features each request was installed "
    "with), _gather_mm_embeddings, reset_encoder_cache and (0.33.0) "
    "_process_encoder_cache_scheduler_output, on a runner without __init__; stand-ins: "
    "a passthrough model (embed_multimodal), a late-interaction runner with nothing to "
    "clear, the request states, input batch and SchedulerOutput fields those methods "
    "read, 0.22.1's two-line free of _update_states; the drafter's look-ahead is "
    "_gather_mm_embeddings(shift_computed_tokens=1)",
    "v2": "vLLM's model runner V2 (vllm.v1.worker.gpu, MMSPEC_VLLM_MODEL_RUNNER=v2): "
    "EncoderCache (free_encoder_cache per freed hash, as GPUModelRunner.free_states; "
    "encoder_outputs; reset_encoder_cache) and EncoderRunner (prepare_mm_inputs, "
    "execute_mm_encoder, gather_mm_embeddings), the store through "
    "ModelState.execute_mm_encoder (0.22.1: its three lines in "
    "DefaultModelState.get_mm_embeddings); stand-ins: a passthrough model "
    "(embed_multimodal), a one-row inputs_embeds buffer, the request features and batch "
    "arrays gather_mm_embeddings reads, each window's prompt ending where it ends; behind "
    "the engine loop too (the Scheduler built for V2, where the release builds one), the "
    "worker installing each step's requests in the EncoderCache as V2's execute_model "
    "does (GPUModelRunner.free_states; the encoder-cache lines of finish_requests and "
    "add_requests; encoder_input_updates) and encoding what prepare_mm_inputs picks",
}


def _engine_loop_modes(code: VllmCode) -> str:
    """What the report header says of the engine loop: vLLM's Scheduler, and the modes
    the engine machines run it in (SYS-11/12: the engine core's resets and pause
    protocol; SYS-13/14: a drafter and its drafts)."""
    from .engine_build import pads_new_decodes

    if MODEL_RUNNER == "v2":
        return (
            "vLLM's Scheduler (vllm.v1.core.sched.scheduler) built for model runner V2 "
            "(VLLM_USE_V2_MODEL_RUNNER=1: resumed requests reinstalled, encoder input "
            "updates), the worker's requests installed in V2's EncoderCache; resets and "
            "weight updates: EngineCore's own functions; hybrid models as on V1 (no Mamba "
            "layer runs); drafter: the EAGLE stand-in config, its look-ahead V2's "
            "gather_mm_embeddings(draft_lookahead=1); async scheduling: vLLM's "
            "AsyncScheduler built for V2, one step in flight, what V2 will encode "
            "foreseen on a copy of its encoder cache"
        )
    drafter = "EAGLE stand-in config, drafts proposed and verified by the runner stand-in"
    if pads_new_decodes(code):
        drafter += " (schedule() also pads a new decode with -1 drafts)"
    return (
        "vLLM's Scheduler (vllm.v1.core.sched.scheduler); resets and weight updates: "
        "EngineCore's own functions; drafter: " + drafter + "; async scheduling: "
        "vLLM's AsyncScheduler, one step in flight (EngineCore.step_with_batch_queue)"
    )


# Checked before vLLM is imported: a pair the adapter does not know is one line at once.
PROCESSOR_CACHE = chosen(PROCESSOR_CACHE_VARIABLE, _ITEM_CACHE)
MODEL_RUNNER = chosen(MODEL_RUNNER_VARIABLE, _WORKER_STORE)
try:  # the releases' declarations judge one variant at a time
    active_variant()
except DeclarationError as _error:
    raise VllmSourceError(str(_error)) from None
VLLM, SOURCE = load_vllm()
CODE = _import_code()
ADAPTER, NOT_PROVIDED, APIS = _build(SOURCE, CODE)
for _component, _reason in NOT_PROVIDED.items():
    print(f"vllm adapter: {_component} not provided: {_reason}", file=sys.stderr)

__all__ = [
    "ADAPTER",
    "APIS",
    "CODE",
    "NOT_PROVIDED",
    "SOURCE",
    "VllmApiError",
    "VllmSourceError",
    "VllmUnavailableError",
]

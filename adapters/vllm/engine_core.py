"""vLLM's engine-core entry points for cache resets and weight updates, run on the
adapter's scheduler and worker stand-in (SYS-11, SYS-12).

``EngineCore.reset_encoder_cache``, ``EngineCore.reset_prefix_cache``,
``EngineCore.pause_scheduler`` (with ``_reset_caches``, and in 0.33 ``_finish_pause``)
and ``EngineCore.resume_scheduler`` are vLLM's own functions, called unchanged. They read
three attributes of the engine core: ``scheduler``, ``model_executor`` and
``mm_receiver_cache``. :class:`CoreShim` has exactly those — vLLM's ``Scheduler``, the
worker stand-in as the executor, and no receiver cache (the engine loop has no
front-end item cache: FIC is judged apart) — and those functions as its methods, so the
order and the arguments of the calls between them are vLLM's.

What stands in is the executor (:class:`ExecutorStandIn`): its ``reset_encoder_cache``
is ``Worker.reset_encoder_cache`` → ``GPUModelRunner.reset_encoder_cache``, the
runner's own method when the worker store is vLLM's runner
(:class:`~adapters.vllm.runner.VllmWorkerStore`; V2's ``EncoderCache.reset_encoder_cache``
behind :class:`~adapters.vllm.runner_v2.VllmV2WorkerStore`), else every held hash freed;
``reset_mm_cache`` has no processor cache to clear; ``collective_rpc`` answers
``synchronize_device`` (0.33's ``_finish_pause``: there is no device) and refuses any
other call, so that a release that starts relying on another worker call is noticed.
"""

from __future__ import annotations

from typing import Any

from spec.components import WorkerStore
from spec.types import WorkerStep

from .runner import VllmWorkerStore
from .runner_v2 import VllmV2WorkerStore

#: The ``EngineCore`` functions a shim carries (each where the release has it).
CORE_FUNCTIONS = (
    "reset_prefix_cache",
    "reset_mm_cache",
    "reset_encoder_cache",
    "_reset_caches",
    "_finish_pause",
    "pause_scheduler",
    "resume_scheduler",
)


class ExecutorStandIn:
    """The model executor as the engine core's cache resets reach it."""

    def __init__(self, store: WorkerStore) -> None:
        self._store = store

    def reset_encoder_cache(self) -> None:
        if isinstance(self._store, VllmWorkerStore | VllmV2WorkerStore):
            self._store.reset_encoder_cache()
            return
        held = tuple(sorted(self._store.held_hashes()))
        self._store.execute_step(WorkerStep(freed_mm_hashes=held, encoder_outputs={}, gathers=()))

    def reset_mm_cache(self) -> None:
        """No processor cache in the engine loop."""

    def collective_rpc(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        if method == "synchronize_device":
            return [None]
        raise NotImplementedError(f"the executor stand-in has no worker call {method!r}")


class CoreShim:
    """The three attributes vLLM's ``EngineCore`` cache and pause functions read; the
    functions themselves are set on the class by :func:`core_shim`."""

    def __init__(self, scheduler: Any, executor: ExecutorStandIn) -> None:
        self.scheduler = scheduler
        self.model_executor = executor
        self.mm_receiver_cache = None


def core_shim(engine_core_cls: Any, scheduler: Any, executor: ExecutorStandIn) -> Any:
    """A :class:`CoreShim` whose methods are ``engine_core_cls``'s functions."""
    methods = {
        name: getattr(engine_core_cls, name)
        for name in CORE_FUNCTIONS
        if hasattr(engine_core_cls, name)
    }
    shim_cls = type("EngineCoreShim", (CoreShim,), methods)
    return shim_cls(scheduler, executor)

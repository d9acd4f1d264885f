"""vLLM's multimodal processor cache pair behind ``spec.components.ItemCache`` (FIC).

The sender is the API process's (P0) LRU shadow, the receiver the engine core's (P1)
cache: 0.33's ``LruKeyReplicatedSenderCache`` / ``LruKeyReplicatedReceiverCache``
(``vllm/multimodal/cache/lru.py``), 0.22.1's ``MultiModalProcessorSenderCache`` /
``MultiModalReceiverCache`` (``vllm/multimodal/cache.py``) — the classes
``processor_cache_from_config`` and ``engine_receiver_cache_from_config`` build for the
default ``mm_processor_cache_type="lru"``. Both are built from vLLM's own
``MultiModalConfig(mm_processor_cache_gb=capacity / 2**30)`` (the only part of the model
config they read; the object handing it over is the one stand-in here).

An item's payload travels as vLLM's own ``MultiModalKwargsItem`` holding one uint8
tensor of the payload's bytes (its size is what vLLM's LRU weighs: ``nbytes``), and is
read back from the tensor vLLM returns.

``send`` replays, call for call, what the processor does with the cache for one request
(``BaseMultiModalProcessor._get_cache_missing_items`` then ``_merge_mm_kwargs``:
``is_cached`` for every item, ``touch_sender_cache_item`` for every item, then
``get_and_update_item`` per item, with no data for an item ``is_cached`` reported held).
``receive`` is the engine core's one call, ``get_and_update_features``, on
``MultiModalFeatureSpec``\\ s keyed by ``mm_hash``. vLLM's ``MultiModalCacheMissError``
(0.33) is the spec's ``ItemCacheMissError``; anything else vLLM raises propagates.
0.22.1's sender has no ``invalidate``: the adapter raises ``VllmApiError`` there (the
machine only invalidates after a miss, which 0.22.1 never reports).

Every call into vLLM runs under a deadline of CPU time (``ITIMER_VIRTUAL``,
:data:`DEADLINE_CPU_S`): 0.22.1's ``LRUCache.touch`` of a key it does not hold leaves the
key in its recency order, and a later eviction that reaches it loops forever
(docs/findings.md, V18). The deadline turns the hang into ``VllmHangError``, which the
machine reports under the clause whose call did not return, instead of hanging the run.
It counts the process's own CPU time, not the wall clock, so a loaded machine that
deschedules the process never reads as a hang; and it is a fraction of a second, not the
whole second ``signal.alarm`` allows at the least: against 0.22.1 the machine meets the loop
in most programs, and each cost a second (the ItemCacheMachine took 172 of the 546 s of
the CI's 0.22.1 run).
"""

from __future__ import annotations

import gc
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, TypeVar

import torch

from spec.errors import ItemCacheMissError

from .versions import VllmApiError, VllmCode

_GIB = 1 << 30
#: How much CPU time one call into vLLM's caches may take: the longest that returned in
#: the CI's runs of both releases took under 5 ms (the clock's tick), and the collector is
#: held off during a call, so a pause of its own never reads as a hang.
DEADLINE_CPU_S = 0.1
_T = TypeVar("_T")


class VllmHangError(TimeoutError):
    """A call into vLLM's item caches did not return within :data:`DEADLINE_CPU_S` of CPU."""


@contextmanager
def _deadline(what: str) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise VllmHangError(
            f"{what} did not return within {DEADLINE_CPU_S} s of CPU time (vLLM loops)"
        )

    previous = signal.signal(signal.SIGVTALRM, expire)
    collecting = gc.isenabled()
    gc.disable()
    signal.setitimer(signal.ITIMER_VIRTUAL, DEADLINE_CPU_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)
        if collecting:
            gc.enable()


def _guarded(what: str, call: Callable[[], _T]) -> _T:
    with _deadline(what):
        return call()
#: The field every payload is stored under.
_FIELD = "payload"


class VllmItemCache:
    """vLLM's P0 sender cache and P1 receiver cache of one capacity."""

    def __init__(self, code: VllmCode, capacity: int) -> None:
        self._code = code
        mm_cache = code.module("mm_cache")
        config = code.module("config").MultiModalConfig(mm_processor_cache_gb=capacity / _GIB)
        model_config = SimpleNamespace(get_multimodal_config=lambda: config)
        if hasattr(mm_cache, "LruKeyReplicatedSenderCache"):
            self.sender = mm_cache.LruKeyReplicatedSenderCache(model_config)
            self.receiver = mm_cache.LruKeyReplicatedReceiverCache(model_config)
        else:
            self.sender = mm_cache.MultiModalProcessorSenderCache(model_config)
            self.receiver = mm_cache.MultiModalReceiverCache(model_config)
        self._miss_error: type[BaseException] | None = getattr(
            mm_cache, "MultiModalCacheMissError", None
        )

    def _kwargs_item(self, payload: bytes) -> Any:
        inputs = self._code.module("inputs")
        tensor = torch.frombuffer(bytearray(payload), dtype=torch.uint8) if payload else (
            torch.empty(0, dtype=torch.uint8)
        )
        element = inputs.MultiModalFieldElem(
            data=tensor, field=inputs.MultiModalSharedField(batch_size=1)
        )
        return inputs.MultiModalKwargsItem({_FIELD: element})

    @staticmethod
    def _payload(kwargs_item: Any) -> bytes:
        tensor = kwargs_item[_FIELD].data
        return bytes(tensor.cpu().numpy().tobytes())

    def send(self, items: list[tuple[str, bytes]]) -> list[bytes | None]:
        return _guarded("the sender cache", lambda: self._send(items))

    def _send(self, items: list[tuple[str, bytes]]) -> list[bytes | None]:
        keys = [key for key, _ in items]
        held = list(self.sender.is_cached(keys))
        for key in keys:
            self.sender.touch_sender_cache_item(key)
        sent: list[bytes | None] = []
        for (key, payload), is_held in zip(items, held, strict=True):
            item = None if is_held else (self._kwargs_item(payload), [])
            kwargs_item, _updates = self.sender.get_and_update_item(item, key)
            sent.append(None if kwargs_item is None else self._payload(kwargs_item))
        return sent

    def receive(self, items: list[tuple[str, bytes | None]]) -> list[bytes]:
        wire = [(key, None if sent is None else self._kwargs_item(sent)) for key, sent in items]
        return self._resolve(wire, "the receiver cache")

    def _resolve(self, wire: list[tuple[str, Any]], what: str) -> list[bytes]:
        """The receiver's one call, ``get_and_update_features``, on a request's wire (per
        item its key and what the sender handed on: a kwargs item, a handle, or None)."""
        inputs = self._code.module("inputs")
        features = [
            inputs.MultiModalFeatureSpec(
                data=kwargs_item,
                modality="image",
                identifier=key,
                mm_position=inputs.PlaceholderRange(offset=0, length=1),
                mm_hash=key,
            )
            for key, kwargs_item in wire
        ]
        try:
            resolved = _guarded(what, lambda: self.receiver.get_and_update_features(features))
        except Exception as error:
            if self._miss_error is not None and isinstance(error, self._miss_error):
                raise ItemCacheMissError(str(error)) from None
            raise
        return [self._payload(feature.data) for feature in resolved]

    def invalidate(self, key: str) -> None:
        invalidate = getattr(self.sender, "invalidate", None)
        if invalidate is None:
            raise VllmApiError("this vLLM's sender cache has no invalidate (added in 0.33)")
        invalidate(key)

    def clear(self) -> None:
        _guarded("clear_cache", self.sender.clear_cache)
        _guarded("clear_cache", self.receiver.clear_cache)

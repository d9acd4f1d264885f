"""vLLM's shared-memory processor cache pair behind ``spec.components.ItemCache`` (FIC),
``mm_processor_cache_type="shm"``: ``ShmObjectStoreSenderCache`` in the API process (P0),
the single writer of a ring buffer in ``/dev/shm`` (``SingleWriterShmObjectStorage``), and
``ShmObjectStoreReceiverCache`` in the worker (``WorkerWrapperBase._apply_mm_cache``: it
resolves a request's items when the request is first scheduled, not when it arrives).

The wire: the sender turns each item into a handle (``address``, ``monotonic_id`` and, in
0.33.0, a signature) of the object it wrote — or, for an item it could not store (too
large, or a full buffer whose oldest objects are still unread), the item itself. What
the adapter tells the machine follows the data, not the handle: an item whose payload
the sender wrote to the ring for this request (or passed whole) came *with its
payload*; an item the sender answered from its cache — held when the request arrived
(the processor sends no data), or written by an earlier item of the same request under
the same key (the sender drops the data it is given) — was *left out* (None), as the
LRU pair's sender leaves it out. ``invalidate`` is the base class's: a no-op in 0.33.0 (the
writer's index cannot drift from its own ring); 0.22.1 has none, as for the LRU pair. The
handles themselves travel, unchanged, from ``send`` to the ``receive`` of the same
request: the adapter keeps the wires of requests sent and not yet received, and
``receive`` takes the latest one with its keys (the interface has no request ids; a
request waiting across a reset is received after later ones, FIC-4).

Stand-ins, listed in the report header: the ``VllmConfig`` (a namespace with the two
fields the caches read: ``parallel_config.world_size`` = 1, one worker, and
``model_config.get_multimodal_config()``, vLLM's own ``MultiModalConfig``), the worker
lock (a ``multiprocessing.Lock``, what the executor passes), and the buffer's name
(``VLLM_OBJECT_STORAGE_SHM_BUFFER_NAME``, one per pair, so pairs never share a segment).
The ring holds serialised objects — an item of ``n`` payload bytes takes
:data:`OBJECT_OVERHEAD` + ``n`` bytes (vLLM's msgpack framing, its per-object header) —
so a cache of ``capacity`` is a ring of ``capacity × OBJECT_OVERHEAD`` bytes: about as many
small items as the LRU pair of that capacity holds. FIC fixes what each item resolves
to, not which keys stay held, so the scale changes no verdict's meaning.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import weakref
from types import SimpleNamespace
from typing import Any

from .item_cache import VllmItemCache
from .versions import VllmCode

#: The bytes vLLM's ring spends on an item beyond its payload: the msgpack framing of a
#: ``MultiModalKwargsItem`` with one uint8 tensor, the reader flag and the ring's
#: per-object header (measured on 0.22.1 and 0.33.0: 126 bytes for a 3-byte payload).
OBJECT_OVERHEAD = 123
#: The environment variable vLLM's caches read the segment's name from.
SHM_NAME_VARIABLE = "VLLM_OBJECT_STORAGE_SHM_BUFFER_NAME"
_pairs = itertools.count()
#: How many unreceived requests' wires a pair keeps (dropped requests' never leave).
_PENDING_KEPT = 16


class VllmShmItemCache(VllmItemCache):
    """vLLM's shared-memory sender (the ring's writer) and worker receiver (a reader)."""

    def __init__(self, code: VllmCode, capacity: int) -> None:
        self._code = code
        mm_cache = code.module("mm_cache")
        mm_config = code.module("config").MultiModalConfig(
            mm_processor_cache_gb=capacity * OBJECT_OVERHEAD / 2**30,
            mm_processor_cache_type="shm",
            mm_shm_cache_max_object_size_mb=1,
        )
        vllm_config = SimpleNamespace(
            parallel_config=SimpleNamespace(world_size=1),
            model_config=SimpleNamespace(get_multimodal_config=lambda: mm_config),
        )
        previous = os.environ.get(SHM_NAME_VARIABLE)
        os.environ[SHM_NAME_VARIABLE] = f"mmspec_{os.getpid()}_{next(_pairs)}"
        try:
            self.sender = mm_cache.ShmObjectStoreSenderCache(vllm_config)
            self.receiver = mm_cache.ShmObjectStoreReceiverCache(
                vllm_config, multiprocessing.Lock()
            )
        finally:
            if previous is None:
                os.environ.pop(SHM_NAME_VARIABLE, None)
            else:
                os.environ[SHM_NAME_VARIABLE] = previous
        # The writer unlinks the segment when the pair goes (vLLM's own close()).
        weakref.finalize(self, self.sender.close)
        self._miss_error = getattr(mm_cache, "MultiModalCacheMissError", None)
        #: The wires of requests sent and not yet received, oldest first: (key, what the
        #: sender handed on) per item. A dropped request's stays until pushed out.
        self._pending: list[list[tuple[str, Any]]] = []

    def _send(self, items: list[tuple[str, bytes]]) -> list[bytes | None]:
        # BaseMultiModalProcessor: is_cached for every item, touch every item, then
        # get_and_update_item per item (no data for a held one), then (0.33.0)
        # release_sender_touches, in a finally.
        keys = [key for key, _ in items]
        held = list(self.sender.is_cached(keys))
        for key in keys:
            self.sender.touch_sender_cache_item(key)
        wire: list[tuple[str, Any]] = []
        sent: list[bytes | None] = []
        try:
            for (key, payload), is_held in zip(items, held, strict=True):
                item = None if is_held else (self._kwargs_item(payload), [])
                # Held now — up front, or written by an earlier item of this request
                # under the same key — the sender answers the held object's handle and
                # drops whatever data it was given: this item's data is left out.
                answered_from_cache = self.sender.is_cached_item(key)
                kwargs_item, _updates = self.sender.get_and_update_item(item, key)
                wire.append((key, kwargs_item))
                sent.append(None if answered_from_cache else payload)
        finally:
            release = getattr(self.sender, "release_sender_touches", None)
            if release is not None:
                release()
        self._pending = [*self._pending[-(_PENDING_KEPT - 1):], wire]
        return sent

    def receive(self, items: list[tuple[str, bytes | None]]) -> list[bytes]:
        keys = [key for key, _ in items]
        matching = [i for i, wire in enumerate(self._pending) if [k for k, _ in wire] == keys]
        if not matching:
            raise ValueError(f"receive({keys}): no request with these keys was sent")
        return self._resolve(self._pending.pop(matching[-1]), "the worker's receiver cache")

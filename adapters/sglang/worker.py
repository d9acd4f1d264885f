"""SGLang's worker side of an item's embeddings behind ``spec.components.WorkerStore``:
how ``mm_schedule`` serves one request's chunk (SPEC.md WRK-3, WRK-4).

SGLang's worker keeps no store that the scheduler fills and frees. For each item that
overlaps a request's chunk, ``mm_schedule._get_chunked_embedding_by_item`` (0.5.22,
0.5.23) looks the item up by its hash in the process's ``MultiModalStaticCache``, encodes
what it misses, stores that there, and cuts the chunk's rows out of the item's embedding
(``_slice_item_chunk``; ``get_embedding_chunk`` for an item of several runs, the path
``_get_chunked_embedding_full`` takes for it). 0.5.3's ``mm_utils._get_chunked_prefill_embedding``
does the same per request, with ``MultiModalCache`` and ``get_embedding_chunk``. So this
store meets :class:`spec.components.SelfManagedWorkerStore`: WRK-1, WRK-2 and WRK-5 (the
scheduler's frees, the held set it mirrors, the miss it must not paper over) are not
provided, and the gathers are SGLang's:

- an item's runs (``MultimodalDataItem.offsets``, inclusive ends) are what the processor's
  ``BaseMultimodalProcessor.get_mm_items_offset`` finds in the token ids: the positions
  that take an embedding hold the image token, the others (row breaks) a text token, with
  a text token either side of the item, as in any prompt;
- an encoder output is stored with ``set(key, EmbeddingResult(...))`` (0.5.3: ``put``)
  under the 64-bit key SGLang keys items by (through the EMB adapter's
  :class:`~adapters.sglang.embedding_cache.SglangEmbeddingCache`), as a tensor of its
  own: SGLang stores the encoder's fresh output, which nothing else holds or writes;
- a gather of positions ``[s, e)`` of an item at ``offset`` is the chunk
  ``[offset + s, offset + e)``: ``_item_overlap`` decides whether it touches the item's
  runs (no rows if not: the caller skips the item), ``get_single`` (``get``) fetches the
  embedding and ``_slice_item_chunk`` cuts the rows (0.5.3: the caller's "every run lies
  before the chunk" skip, then ``get_embedding_chunk``). The rows come back as a copy, as
  the caller's ``torch.concat`` and its scatter into ``inputs_embeds`` copy them.

Frees are ignored (SGLang's cache evicts by its own policy, which EMB judges), and a
gather of a hash the cache does not hold raises ``MissingEmbeddingError`` where SGLang
would encode the item (not judged: WRK-5 is not provided).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from spec.errors import InvalidInputError, MissingEmbeddingError
from spec.types import GatherSpec, WorkerStep

from .embedding_cache import SglangEmbeddingCache

#: Room for every output a property stores: nothing is evicted behind a gather.
CAPACITY_BYTES = 1 << 30
#: The token ids the runs are found in: the image's pad token and text around it.
IMAGE_TOKEN, TEXT_TOKEN = 7, 1


class SglangWorkerStore:
    """The release's cache and its chunk slicing (module docstring)."""

    def __init__(self, modules: Any) -> None:
        self._m = modules
        self._cache = SglangEmbeddingCache(modules.multimodal_cache, modules.torch, CAPACITY_BYTES)

    def self_managed(self) -> bool:
        return True

    def execute_step(self, step: WorkerStep) -> list[NDArray[Any]]:
        for mm_hash, output in step.encoder_outputs.items():
            self._store(mm_hash, output)
        return [self._gather(spec) for spec in step.gathers]

    def held_hashes(self) -> frozenset[str]:
        return frozenset(self._cache.held())

    def _store(self, mm_hash: str, output: NDArray[Any]) -> None:
        if not isinstance(output, np.ndarray) or output.ndim != 2:
            raise InvalidInputError(f"an encoder output is a 2-d array, not {output!r:.80}")
        self._cache.put(mm_hash, output.copy())  # the encoder's fresh output: its own

    def _runs(self, spec: GatherSpec) -> list[tuple[int, int]]:
        """The item's runs, absolute, as the processor finds them in the token ids."""
        position = spec.mm_position
        mask = position.is_embed or (True,) * position.length
        ids = [TEXT_TOKEN, *(IMAGE_TOKEN if flag else TEXT_TOKEN for flag in mask), TEXT_TOKEN]
        found = self._m.base_processor.get_mm_items_offset(
            self._m.torch.tensor(ids), IMAGE_TOKEN
        )
        # one text token before the item: position p of ``ids`` is offset + p - 1
        return [(position.offset + start - 1, position.offset + end - 1) for start, end in found]

    def _gather(self, spec: GatherSpec) -> NDArray[Any]:
        item = self._m.schedule_batch.MultimodalDataItem(
            modality=self._m.schedule_batch.Modality.IMAGE
        )
        item.offsets = self._runs(spec)
        chunk_start = spec.mm_position.offset + spec.start_idx
        chunk_len = spec.end_idx - spec.start_idx
        embedding = self._embedding(spec.mm_hash)
        nothing = embedding[:0]  # the caller skips an item the chunk does not touch
        schedule = self._m.mm_schedule
        if schedule is not None:
            touched = schedule._item_overlap(item, chunk_start, chunk_start + chunk_len)
            rows = (
                nothing if touched is None
                else schedule._slice_item_chunk(embedding, item, chunk_start, chunk_len)
            )
        elif all(end < chunk_start for _, end in item.offsets):
            rows = nothing
        else:
            rows = self._m.mm_utils.get_embedding_chunk(
                embedding, chunk_start, chunk_len, item.offsets
            )[0]
        return np.array(rows.numpy(), copy=True)

    def _embedding(self, mm_hash: str) -> Any:
        tensor = self._cache.tensor(mm_hash)
        if tensor is None:
            raise MissingEmbeddingError(f"the embedding cache holds no {mm_hash}")
        return tensor

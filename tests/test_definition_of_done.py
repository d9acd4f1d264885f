"""The mini-build's "Definition of done" (seed 000), against the reference: expansion
arithmetic, cache sharing by content, the splice's count contract, and eviction."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from reference.encoder import Encoder
from reference.encoder_cache import EncoderCacheManager
from reference.hasher import Hasher
from reference.processor import Processor
from reference.splice import Splice
from spec.errors import SpliceCountError
from spec.types import MultiModalItem, PlaceholderRange, ProcessorConfig, RequestView, ToyPolicy

CONFIG = ProcessorConfig(policy=ToyPolicy())
IMG = CONFIG.marker_id
HIDDEN = 8


class MiniPipeline:
    """processor -> hasher -> encoder cache -> encoder, as the mini-build wires them:
    every item of a request is looked up by content hash, encoded only on a miss."""

    def __init__(self, cache_size: int) -> None:
        self.processor = Processor(CONFIG)
        self.hasher = Hasher()
        self.encoder = Encoder(HIDDEN)
        self.cache = EncoderCacheManager(cache_size)
        self.store: dict[str, NDArray[Any]] = {}  # the worker's embeddings

    def admit(self, request_id: str, prompt: list[int], images: list[bytes]) -> RequestView:
        expanded = self.processor.expand(prompt, images)
        request = RequestView(
            request_id,
            tuple(
                MultiModalItem(self.hasher.hash_item(image), placeholder_range)
                for image, placeholder_range in zip(images, expanded.ranges, strict=True)
            ),
        )
        for input_id, (image, mm_item) in enumerate(zip(images, request.items, strict=True)):
            if self.cache.check_and_update_cache(request, input_id):
                continue
            assert self.cache.can_allocate(request, input_id, 10**6, 0), "request rejected"
            self.cache.allocate(request, input_id)
            for freed in self.cache.get_freed_mm_hashes():
                del self.store[freed]
            self.store[mm_item.mm_hash] = self.encoder.encode(image, mm_item.num_embeds)
        return request

    def finish(self, request: RequestView) -> None:
        self.cache.free(request)


def test_expansion_arithmetic_with_two_images_of_different_sizes() -> None:
    image_a, image_b = b"\x01" * 100, b"\x02" * 300  # 100//64+1 = 2, 300//64+1 = 5 tokens
    prompt = [1, 2, IMG, 3, IMG, 4]
    expanded = Processor(CONFIG).expand(prompt, [image_a, image_b])
    assert len(expanded.token_ids) == len(prompt) - 2 + 2 + 5
    assert expanded.ranges == (PlaceholderRange(offset=2, length=2), PlaceholderRange(5, 5))
    assert expanded.token_ids[:2] == (1, 2)
    assert expanded.token_ids[4] == 3 and expanded.token_ids[-1] == 4


def test_cache_sharing_is_by_content() -> None:
    same = MiniPipeline(cache_size=100)
    image = b"\x07" * 200
    same.admit("r1", [5, IMG], [image])
    same.admit("r2", [6, IMG], [bytes(bytearray(image))])  # equal bytes, another object
    assert same.encoder.num_calls == 1

    different = MiniPipeline(cache_size=100)
    other = b"\x07" * 199 + b"\x08"  # same length, different bytes
    different.admit("r1", [5, IMG], [image])
    different.admit("r2", [6, IMG], [other])
    assert different.encoder.num_calls == 2


def test_corrupted_expansion_count_trips_the_splice_contract() -> None:
    pipeline = MiniPipeline(cache_size=100)
    image = b"\x03" * 130  # 3 tokens
    request = pipeline.admit("r1", [1, IMG, 2], [image])
    [placeholder_range] = pipeline.processor.expand([1, IMG, 2], [image]).ranges
    is_multimodal = np.zeros(5, dtype=bool)
    is_multimodal[placeholder_range.offset : placeholder_range.end] = True
    embeddings = pipeline.store[request.items[0].mm_hash]
    inputs = np.zeros((5, HIDDEN), dtype=np.float32)

    merged = Splice().merge(inputs, [embeddings], is_multimodal)  # the contract holds
    assert np.array_equal(merged[1:4], embeddings)

    is_multimodal[placeholder_range.end] = True  # corrupt: one placeholder too many
    with pytest.raises(SpliceCountError) as raised:
        Splice().merge(inputs, [embeddings], is_multimodal)
    assert str(raised.value) == "Attempted to assign 3 = 3 multimodal tokens to 4 placeholders"


def test_eviction_makes_room_instead_of_rejecting() -> None:
    image_a, image_b = b"\x0a" * 256, b"\x0b" * 256  # 5 embeddings each
    pipeline = MiniPipeline(cache_size=5)  # room for one image
    request_a = pipeline.admit("A", [1, IMG], [image_a])
    hash_a = request_a.items[0].mm_hash
    pipeline.finish(request_a)
    assert dict(pipeline.cache.freeable) == {hash_a: 5}

    request_b = pipeline.admit("B", [2, IMG], [image_b])  # not rejected
    assert hash_a not in pipeline.cache.cached  # A's entry was evicted...
    assert hash_a not in pipeline.store  # ...reported freed, and dropped by the worker
    assert set(pipeline.cache.cached) == {request_b.items[0].mm_hash}
    assert pipeline.encoder.num_calls == 2

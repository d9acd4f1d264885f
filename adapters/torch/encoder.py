"""A small ViT-style encoder in torch (ENC-1..4, DIFF-4): patch embedding, pre-norm
transformer layers, and an MLP projector into the LLM's hidden size.

**Pseudo-pixels.** An image reaches the encoder as bytes or a pixel array. Its framed
content (a type tag, the dtype and shape of an array, the bytes) is stretched by
SHAKE-256 into ``num_embeds`` patches of ``patch_dim`` values in ``[-1, 1]``: every byte,
the dtype and the shape reach every patch, so different content of the same size gives
different output (ENC-2) however few patches are asked for. A real preprocessor would
resize and normalise real pixels; the token count here is the processor's, so the
patches are made to measure.

**Batch invariance by construction.** An item's rows must not depend on the other items
in its batch: bitwise on CPU (ENC-4, DIFF-4). A GEMM does not give that — its blocking,
and so its summation order, depends on how many rows it multiplies (fp32 ``F.linear`` of
one row and of that row inside a batch differ on the CPU build). So every reduction here
(linear layers, layer-norm statistics, attention scores, attention-weighted values) is
exact elementwise products summed pairwise in a tree fixed by the reduced size alone
(:func:`fixed_order_sum`). Elementwise IEEE operations give
the same result for an element wherever it sits in a tensor, on any device, so an item
is computed by the same operations in the same order alone or in any batch. The
activation is hard-swish (a GELU stand-in from exactly rounded operations) because
vectorised and scalar code paths of transcendental functions can round differently
depending on an element's position. The one library reduction is ``softmax`` over the
key axis, a per-row kernel; items are batched in groups of equal length, so a row has
the same length alone and in a batch.

Weights are drawn on the CPU from a fixed seed in float32 (the same on every machine),
then moved to the device and cast once per precision.

Over 400 lines (438) because an implementation, written as a student's or an engine's
module would be (the encoder and its token-count policies together), not split along the
suite's layout.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from spec.errors import InvalidInputError
from spec.types import ImageInput

from .device import DEVICE, PRECISIONS, precision_dtype, to_numpy

_PIXEL_KINDS = frozenset("biuf")


@dataclass(frozen=True)
class VitConfig:
    """Sizes of the toy ViT. Small on purpose: the properties run it thousands of
    times; the benchmark fixes it too, so its ratios compare like with like."""

    patch_dim: int = 12  # values per patch: a 2x2 RGB patch
    vit_dim: int = 16
    num_heads: int = 2
    num_layers: int = 2
    mlp_dim: int = 32
    projector_dim: int = 32
    layer_norm_eps: float = 1e-5
    seed: int = 20250601

    def __post_init__(self) -> None:
        if self.vit_dim % self.num_heads:
            raise InvalidInputError(
                f"vit_dim {self.vit_dim} is not divisible by num_heads {self.num_heads}"
            )


# --- the exact-operation building blocks ------------------------------------------------


def fixed_order_sum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Sum over ``dim`` (dropped) pairwise, in a tree fixed by the size of ``dim``
    alone: each level is one elementwise add of the second half onto the first (an odd
    element out is carried to the next level). Each output element is the same IEEE sum
    wherever it sits in the tensor, and there are only log2(size) operations."""
    size = x.shape[dim]
    while size > 1:
        half = size // 2
        paired = x.narrow(dim, 0, half) + x.narrow(dim, half, half)
        if size % 2:
            paired = torch.cat([paired, x.narrow(dim, 2 * half, 1)], dim=dim)
        x, size = paired, paired.shape[dim]
    return x.squeeze(dim)


def fixed_order_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x @ weight + bias`` (``weight``: ``(in, out)``): exact elementwise products,
    summed over the input features in a fixed tree, so a row's result never depends on
    how many rows are computed together."""
    return fixed_order_sum(x[..., :, None] * weight, dim=-2) + bias


def fixed_order_layer_norm(
    x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, eps: float
) -> torch.Tensor:
    """Layer norm over the last axis with fixed-order statistics."""
    width = x.shape[-1]
    centred = x - fixed_order_sum(x, dim=-1)[..., None] / width
    variance = fixed_order_sum(centred * centred, dim=-1)[..., None] / width
    return centred / torch.sqrt(variance + eps) * gain + bias


def hard_swish(x: torch.Tensor) -> torch.Tensor:
    """``x * clamp(x / 6 + 1/2, 0, 1)``: every step exactly rounded."""
    return x * torch.clamp(x * (1.0 / 6.0) + 0.5, 0.0, 1.0)


# --- weights ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layer:
    norm1_gain: torch.Tensor
    norm1_bias: torch.Tensor
    q: tuple[torch.Tensor, torch.Tensor]
    k: tuple[torch.Tensor, torch.Tensor]
    v: tuple[torch.Tensor, torch.Tensor]
    out: tuple[torch.Tensor, torch.Tensor]
    norm2_gain: torch.Tensor
    norm2_bias: torch.Tensor
    mlp_in: tuple[torch.Tensor, torch.Tensor]
    mlp_out: tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class _Weights:
    patch_embed: tuple[torch.Tensor, torch.Tensor]
    layers: tuple[_Layer, ...]
    final_gain: torch.Tensor
    final_bias: torch.Tensor
    projector_in: tuple[torch.Tensor, torch.Tensor]
    projector_out: tuple[torch.Tensor, torch.Tensor]

    def to(self, device: torch.device, dtype: torch.dtype) -> _Weights:
        def move(t: torch.Tensor) -> torch.Tensor:
            return t.to(device=device, dtype=dtype)

        def pair(p: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
            return move(p[0]), move(p[1])

        return _Weights(
            patch_embed=pair(self.patch_embed),
            layers=tuple(
                _Layer(
                    move(layer.norm1_gain),
                    move(layer.norm1_bias),
                    pair(layer.q),
                    pair(layer.k),
                    pair(layer.v),
                    pair(layer.out),
                    move(layer.norm2_gain),
                    move(layer.norm2_bias),
                    pair(layer.mlp_in),
                    pair(layer.mlp_out),
                )
                for layer in self.layers
            ),
            final_gain=move(self.final_gain),
            final_bias=move(self.final_bias),
            projector_in=pair(self.projector_in),
            projector_out=pair(self.projector_out),
        )


def _cpu_weights(config: VitConfig, hidden_size: int) -> _Weights:
    """float32 weights on the CPU from ``config.seed``: the same on every machine."""
    generator = torch.Generator(device="cpu").manual_seed(config.seed)

    def dense(fan_in: int, fan_out: int) -> tuple[torch.Tensor, torch.Tensor]:
        scale = 1.0 / math.sqrt(fan_in)
        weight = torch.randn(fan_in, fan_out, generator=generator) * scale
        bias = torch.randn(fan_out, generator=generator) * 0.02
        return weight, bias

    def norm(width: int) -> tuple[torch.Tensor, torch.Tensor]:
        gain = 1.0 + 0.1 * torch.randn(width, generator=generator)
        return gain, 0.02 * torch.randn(width, generator=generator)

    d, m = config.vit_dim, config.mlp_dim
    patch_embed = dense(config.patch_dim, d)
    layers = []
    for _ in range(config.num_layers):
        g1, b1 = norm(d)
        q, k, v, out = dense(d, d), dense(d, d), dense(d, d), dense(d, d)
        g2, b2 = norm(d)
        layers.append(_Layer(g1, b1, q, k, v, out, g2, b2, dense(d, m), dense(m, d)))
    final_gain, final_bias = norm(d)
    return _Weights(
        patch_embed=patch_embed,
        layers=tuple(layers),
        final_gain=final_gain,
        final_bias=final_bias,
        projector_in=dense(d, config.projector_dim),
        projector_out=dense(config.projector_dim, hidden_size),
    )


@contextmanager
def _one_cpu_thread(device: torch.device) -> Iterator[None]:
    """Run on one CPU thread. The forward pass is thousands of tiny operations; waking
    an OpenMP team for each (``softmax`` parallelises even a 4x4 input) costs a hundred
    times the arithmetic. Results do not depend on it: every operation is elementwise
    or per row."""
    if device.type != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# --- the model --------------------------------------------------------------------------


class TinyVit:
    """The encoder proper, on tensors: ``forward(pixels)`` maps ``(batch, n, patch_dim)``
    patches to ``(batch, n, hidden_size)`` embeddings in one precision."""

    #: The dense layer's kernel (a variant may swap it; see adapters/zoo/torch_*).
    linear = staticmethod(fixed_order_linear)

    def __init__(
        self,
        hidden_size: int,
        config: VitConfig = VitConfig(),
        device: torch.device = DEVICE,
    ) -> None:
        self.config = config
        self.hidden_size = hidden_size
        self.device = device
        self._cpu_weights = _cpu_weights(config, hidden_size)
        self._weights: dict[torch.dtype, _Weights] = {}
        self._positions: dict[tuple[int, torch.dtype], torch.Tensor] = {}

    def weights(self, dtype: torch.dtype) -> _Weights:
        if dtype not in self._weights:
            self._weights[dtype] = self._cpu_weights.to(self.device, dtype)
        return self._weights[dtype]

    def positions(self, length: int, dtype: torch.dtype) -> torch.Tensor:
        """Sinusoidal position codes for ``length`` patches: a function of the length
        alone, computed on the CPU in float64, so alone or batched they are the same."""
        key = (length, dtype)
        if key not in self._positions:
            width = self.config.vit_dim
            position = torch.arange(length, dtype=torch.float64)[:, None]
            frequency = torch.exp(
                torch.arange(0, width, 2, dtype=torch.float64) * (-math.log(10000.0) / width)
            )
            table = torch.zeros(length, width, dtype=torch.float64)
            table[:, 0::2] = torch.sin(position * frequency)
            table[:, 1::2] = torch.cos(position * frequency)
            self._positions[key] = table.to(device=self.device, dtype=dtype)
        return self._positions[key]

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode(), _one_cpu_thread(self.device):
            return self._forward(pixels)

    def _forward(self, pixels: torch.Tensor) -> torch.Tensor:
        weights = self.weights(pixels.dtype)
        config = self.config
        x = self.linear(pixels, *weights.patch_embed)
        x = x + self.positions(pixels.shape[1], pixels.dtype)
        for layer in weights.layers:
            x = x + self._attention(x, layer)
            h = fixed_order_layer_norm(x, layer.norm2_gain, layer.norm2_bias, config.layer_norm_eps)
            h = hard_swish(self.linear(h, *layer.mlp_in))
            x = x + self.linear(h, *layer.mlp_out)
        x = fixed_order_layer_norm(x, weights.final_gain, weights.final_bias, config.layer_norm_eps)
        x = hard_swish(self.linear(x, *weights.projector_in))
        return self.linear(x, *weights.projector_out)

    def _attention(self, x: torch.Tensor, layer: _Layer) -> torch.Tensor:
        config = self.config
        batch, length, width = x.shape
        heads, head_dim = config.num_heads, width // config.num_heads
        h = fixed_order_layer_norm(x, layer.norm1_gain, layer.norm1_bias, config.layer_norm_eps)

        def split(t: torch.Tensor) -> torch.Tensor:  # (B, n, C) -> (B, H, n, d)
            return t.reshape(batch, length, heads, head_dim).permute(0, 2, 1, 3)

        q = split(self.linear(h, *layer.q)) * (1.0 / math.sqrt(head_dim))
        k = split(self.linear(h, *layer.k))
        v = split(self.linear(h, *layer.v))
        scores = fixed_order_sum(q[..., :, None, :] * k[..., None, :, :], dim=-1)
        weights = torch.softmax(scores, dim=-1)  # (B, H, query, key)
        mixed = fixed_order_sum(weights[..., :, :, None] * v[..., None, :, :], dim=-2)
        merged = mixed.permute(0, 2, 1, 3).reshape(batch, length, width)
        return self.linear(merged, *layer.out)


# --- the component ----------------------------------------------------------------------


def _frame(tag: bytes, payload: bytes) -> bytes:
    return tag + struct.pack(">Q", len(payload)) + payload


def image_content(image: object) -> bytes:
    """The framed content of a valid image (``InvalidInputError`` otherwise): bytes are
    tagged; arrays carry ``dtype.str``, shape and C-order bytes (ENC-2)."""
    if isinstance(image, bytes):
        if not image:
            raise InvalidInputError("image is 0 bytes long; an image must have content")
        return _frame(b"Y", image)
    if isinstance(image, np.ndarray):
        array: NDArray[Any] = image
        if array.ndim not in (2, 3):
            raise InvalidInputError(
                f"image array must have shape (h, w) or (h, w, c), got shape {array.shape}"
            )
        if array.size == 0:
            raise InvalidInputError(f"image array is empty (shape {array.shape})")
        if array.dtype.kind not in _PIXEL_KINDS:
            raise InvalidInputError(f"image array has non-numeric dtype {array.dtype}")
        header = array.dtype.str.encode("ascii") + struct.pack(
            f">{array.ndim}Q", *(int(side) for side in array.shape)
        )
        return _frame(b"A", _frame(b"H", header) + np.ascontiguousarray(array).tobytes())
    raise InvalidInputError(
        f"image must be bytes or a numpy pixel array, got {type(image).__name__}"
    )


def _check_num_embeds(num_embeds: object) -> int:
    if isinstance(num_embeds, (bool, np.bool_)) or not isinstance(num_embeds, (int, np.integer)):
        raise InvalidInputError(f"num_embeds must be an int, got {type(num_embeds).__name__}")
    if num_embeds < 1:
        raise InvalidInputError(f"num_embeds must be >= 1, got {num_embeds}")
    return int(num_embeds)


def pseudo_pixels(content: bytes, num_patches: int, patch_dim: int) -> NDArray[np.float32]:
    """``(num_patches, patch_dim)`` values in ``[-1, 1]`` stretched from ``content``."""
    stream = hashlib.shake_256(content).digest(num_patches * patch_dim)
    raw = np.frombuffer(stream, dtype=np.uint8).astype(np.float32)
    return ((raw - np.float32(127.5)) / np.float32(127.5)).reshape(num_patches, patch_dim)


class TorchEncoder:
    """``spec.components.Encoder`` on :class:`TinyVit`, plus the precision extension
    the differential properties use (``precisions``, ``device_type``,
    ``encode_batch_as``). The Protocol's methods compute in float32."""

    model_class: type[TinyVit] = TinyVit

    def __init__(self, hidden_size: int, config: VitConfig = VitConfig()) -> None:
        if isinstance(hidden_size, bool) or not isinstance(hidden_size, int):
            raise InvalidInputError(f"hidden_size must be an int, got {type(hidden_size).__name__}")
        if hidden_size < 1:
            raise InvalidInputError(f"hidden_size must be >= 1, got {hidden_size}")
        self._model = self.model_class(hidden_size, config)
        self._num_calls = 0

    @property
    def hidden_size(self) -> int:
        return self._model.hidden_size

    @property
    def num_calls(self) -> int:
        """Items encoded since construction; a batch of k counts k (ENC-3)."""
        return self._num_calls

    @property
    def device_type(self) -> str:
        """``cpu`` or ``cuda``: where batch invariance is bitwise, and where it is
        held to the tolerance DIFF-4 states."""
        return self._model.device.type

    @property
    def precisions(self) -> tuple[str, ...]:
        return tuple(PRECISIONS)

    def encode(self, image: ImageInput, num_embeds: int) -> NDArray[Any]:
        """A ``(num_embeds, hidden_size)`` float32 array (ENC-1, ENC-2)."""
        [output] = self.encode_batch([(image, num_embeds)])
        return output

    def encode_batch(self, items: Sequence[tuple[ImageInput, int]]) -> list[NDArray[Any]]:
        """All items in as few forward passes as their lengths allow (ENC-4)."""
        return self.encode_batch_as(items, "float32")

    def encode_batch_as(
        self, items: Sequence[tuple[ImageInput, int]], precision: str
    ) -> list[NDArray[Any]]:
        """Encode in ``precision`` (float32, float16, bfloat16); the rows come back as
        float32 arrays holding that precision's values exactly. Every item is validated
        before any is encoded, so a bad item leaves ``num_calls`` unchanged."""
        dtype = precision_dtype(precision)
        prepared = self._prepare(items)
        outputs = self._encode_grouped(prepared, dtype)
        self._num_calls += len(outputs)
        return outputs

    def _prepare(self, items: Sequence[tuple[ImageInput, int]]) -> list[NDArray[np.float32]]:
        if not isinstance(items, (list, tuple)):
            raise InvalidInputError(
                f"items must be a list of (image, num_embeds) pairs, got {type(items).__name__}"
            )
        prepared = []
        for index, item in enumerate(items):
            if not isinstance(item, tuple) or len(item) != 2:
                raise InvalidInputError(f"item {index} must be an (image, num_embeds) pair")
            try:
                content = image_content(item[0])
                num_embeds = _check_num_embeds(item[1])
            except InvalidInputError as e:
                raise InvalidInputError(f"item {index}: {e}") from None
            prepared.append(pseudo_pixels(content, num_embeds, self._model.config.patch_dim))
        return prepared

    def _encode_grouped(
        self, pixels: list[NDArray[np.float32]], dtype: torch.dtype
    ) -> list[NDArray[Any]]:
        """One forward pass per distinct length (the batched encode of one step)."""
        by_length: dict[int, list[int]] = {}
        for index, patches in enumerate(pixels):
            by_length.setdefault(len(patches), []).append(index)
        outputs: list[NDArray[Any] | None] = [None] * len(pixels)
        for indices in by_length.values():
            batch = torch.from_numpy(np.stack([pixels[i] for i in indices]))
            batch = batch.to(device=self._model.device, dtype=dtype)
            encoded = self._model.forward(batch).to(torch.float32)
            host = to_numpy(encoded)
            for row, index in enumerate(indices):
                outputs[index] = host[row].copy()
        return [o for o in outputs if o is not None]

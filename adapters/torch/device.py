"""Where the torch adapter computes, in which precisions, and how arrays cross the
numpy boundary.

The properties speak numpy (``spec.components``): every component accepts numpy
arrays, computes in torch on :data:`DEVICE`, and returns numpy. numpy has no bfloat16,
so bfloat16 crosses the boundary as its ``uint16`` bit patterns (:func:`to_bits`,
:func:`from_bits`), never as a lossy float detour.

Importing this module sets process-wide numerics, as the issue asks: TF32 off (an fp32
matmul must be an fp32 matmul, or "bitwise equal to the reference" means nothing) and
deterministic algorithms on. ``CUBLAS_WORKSPACE_CONFIG`` must be set before CUDA starts
for cuBLAS to honour determinism, so it is set here, first, when the user has not.
"""

from __future__ import annotations

import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

from typing import Any  # noqa: E402 - after the environment variable, on purpose

import numpy as np  # noqa: E402
import torch  # noqa: E402
from numpy.typing import NDArray  # noqa: E402

from spec.errors import InvalidInputError  # noqa: E402

#: Overrides the device choice (``cpu``, ``cuda``, ``cuda:1``); default: cuda when
#: available, else cpu.
DEVICE_ENV = "MMSPEC_TORCH_DEVICE"

#: The precisions the adapter computes in, by the names the properties use.
PRECISIONS: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}

#: numpy float dtypes the numpy boundary accepts, and their torch counterparts.
NUMPY_FLOATS: dict[np.dtype[Any], torch.dtype] = {
    np.dtype(np.float16): torch.float16,
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
}


def configure_numerics() -> None:
    """TF32 off and deterministic algorithms on, for the whole process."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # torch >= 2.9 spells it this way
        matmul.fp32_precision = "ieee"
        torch.backends.cudnn.fp32_precision = "ieee"
    else:  # older CUDA builds on the GPU machines
        matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True)


def select_device() -> torch.device:
    """``$MMSPEC_TORCH_DEVICE`` if set, else cuda when available, else cpu."""
    wanted = os.environ.get(DEVICE_ENV)
    if wanted:
        device = torch.device(wanted)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise InvalidInputError(f"{DEVICE_ENV}={wanted}, but CUDA is not available")
        return device
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


configure_numerics()

#: The device every component of the adapter computes on.
DEVICE: torch.device = select_device()


def precision_dtype(precision: str) -> torch.dtype:
    """The torch dtype of a precision name; ``InvalidInputError`` for an unknown one."""
    try:
        return PRECISIONS[precision]
    except KeyError:
        raise InvalidInputError(
            f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}"
        ) from None


def to_device(array: NDArray[Any], device: torch.device = DEVICE) -> torch.Tensor:
    """A device copy of a numpy array (the input is never aliased or modified)."""
    return torch.from_numpy(np.ascontiguousarray(array)).to(device=device, copy=True)


def to_numpy(tensor: torch.Tensor) -> NDArray[Any]:
    """A host numpy copy of a float16/32/64 or bool tensor (bfloat16: :func:`to_bits`)."""
    if tensor.dtype == torch.bfloat16:
        raise InvalidInputError("bfloat16 has no numpy dtype; use to_bits")
    result: NDArray[Any] = tensor.detach().to("cpu").numpy().copy()
    return result


def from_bits(bits: NDArray[Any], device: torch.device = DEVICE) -> torch.Tensor:
    """A bfloat16 device tensor whose elements have the given ``uint16`` bit patterns."""
    if not isinstance(bits, np.ndarray) or bits.dtype != np.uint16:
        raise InvalidInputError(
            "bfloat16 arrays cross the numpy boundary as uint16 bit patterns, got "
            f"{type(bits).__name__} of dtype {getattr(bits, 'dtype', None)}"
        )
    as_int16 = np.ascontiguousarray(bits).view(np.int16)
    return torch.from_numpy(as_int16).to(device=device, copy=True).view(torch.bfloat16)


def to_bits(tensor: torch.Tensor) -> NDArray[np.uint16]:
    """The ``uint16`` bit patterns of a bfloat16 tensor, on the host."""
    if tensor.dtype != torch.bfloat16:
        raise InvalidInputError(f"to_bits needs a bfloat16 tensor, got {tensor.dtype}")
    host: NDArray[Any] = tensor.detach().to("cpu").view(torch.int16).numpy()
    return host.view(np.uint16).copy()


def cast_rounding_once(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``tensor`` converted to ``dtype`` with a single round-to-nearest-even.

    torch converts float64 to float16 or bfloat16 *through float32*: two roundings,
    which differ from numpy's (and IEEE's) single rounding when the float32 rounding
    lands exactly on a half-way point of the target (found by ``diff_splice_matches_
    oracle``). Rounding to float32 *to odd* first makes the second rounding exact:
    float32 keeps at least two more bits than either target (Boldo & Melquiond,
    "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to
    odd", 2008).
    """
    if tensor.dtype != torch.float64 or dtype not in (torch.float16, torch.bfloat16):
        return tensor.to(dtype)
    return _round_to_odd_float32(tensor).to(dtype)


def _round_to_odd_float32(tensor: torch.Tensor) -> torch.Tensor:
    """float64 -> float32 rounding to odd: truncate toward zero, then set the last
    significand bit when the conversion was inexact."""
    nearest = tensor.to(torch.float32)
    widened = nearest.to(torch.float64)
    # Nearest rounding moved away from zero (or overflowed): step one ulp back.
    overshoot = widened.abs() > tensor.abs()
    toward_zero = torch.where(
        overshoot, torch.nextafter(nearest, torch.zeros_like(nearest)), nearest
    )
    inexact = toward_zero.to(torch.float64) != tensor
    bits = toward_zero.view(torch.int32)
    odd = torch.where(inexact, bits | 1, bits)
    return odd.view(torch.float32)

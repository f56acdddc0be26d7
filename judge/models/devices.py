"""Devices and dtypes: which device a run asks for (checked before any work is done), and the dtype its
weights load in. No model is loaded here; code above :mod:`judge.models` checks a device through this module."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from judge.core.errors import ConfigError

if TYPE_CHECKING:
    import torch

#: The dtypes a model may load in, by name (``auto`` besides: bfloat16 on a GPU, float32 elsewhere).
DTYPES = ("float32", "bfloat16", "float16")

_DEVICE = re.compile(r"^(auto|cpu|mps|cuda)(?::(\d+))?$")


def check_device(device: str) -> None:
    """Fail early, in words, on a device this machine does not have (before any work is done)."""
    m = _DEVICE.match(str(device))
    if not m or (m.group(2) is not None and m.group(1) != "cuda"):
        raise ConfigError(f"device {device!r} is not one of auto, cpu, cuda, cuda:N, mps")
    import torch  # here, not above: naming a device is checked without loading torch

    kind, index = m.group(1), m.group(2)
    if kind == "cuda":
        if not torch.cuda.is_available():
            why = (
                "this torch was built without CUDA"
                if torch.version.cuda is None
                else "no CUDA GPU is visible"
            )
            raise ConfigError(
                f"device {device!r} was asked for, but {why} (torch {torch.__version__}); "
                "use cpu, or auto to take a GPU when there is one"
            )
        if index is not None and int(index) >= torch.cuda.device_count():
            raise ConfigError(
                f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s), "
                f"numbered from 0"
            )
    if kind == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device {device!r} was asked for, but MPS is not available on this machine")


def resolve_dtype(dtype: str | torch.dtype, device: str) -> torch.dtype:
    """The torch dtype of a name of :data:`DTYPES`, or of ``auto`` on ``device``."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        return torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    if dtype not in DTYPES:
        raise ConfigError(f"dtype {dtype!r} is not one of auto, {', '.join(DTYPES)}")
    return getattr(torch, dtype)


def resolve_device(device: str = "auto", local_rank: int | None = None) -> str:
    """``auto``: CUDA when available (this process's GPU in a sharded run), else CPU."""
    import torch

    if device != "auto":
        return device
    if torch.cuda.is_available():
        return f"cuda:{local_rank}" if local_rank is not None else "cuda"
    return "cpu"

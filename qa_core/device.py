"""Where neural rankers run: ``RERANK_LAB_DEVICE`` when set, else the GPU when there is one, else the
CPU; and whether they score under automatic mixed precision (``RERANK_LAB_AMP``, off by default).

Every neural ranker and question classifier takes ``default_device()`` when it is built or loaded,
so the app, the CLI, training jobs (their own processes inherit the environment) and scoring jobs
all follow the same variable. The CUDA path is checked by ``benchmarks/gpu_check.py`` only.
"""

from __future__ import annotations

import contextlib
import os

import torch

from qa_core.config import env_flag
from qa_core.types import InputError

DEVICE_VARIABLE = "RERANK_LAB_DEVICE"
AMP_VARIABLE = "RERANK_LAB_AMP"


def use_fp32_precision(mode: str = "ieee") -> None:
    """Make float32 mean IEEE float32 on CUDA too (``mode="ieee"``, what every process gets on
    import). torch lets cuDNN's convolutions and RNNs run in TF32 by default (10 mantissa bits), which
    moved compare_aggregate's H200 scores by 3e-4 against the CPU's and an explanation's score away
    from its ranked score (benchmarks/gpu_check.py, 2026-11-26). Reduced precision is
    ``RERANK_LAB_AMP``'s choice, not a silent default; ``mode="tf32"`` is for measuring it."""
    for backend in (torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn):
        backend.fp32_precision = mode


use_fp32_precision()  # on import: every path that reaches a device imports this module first


def default_device() -> torch.device:
    """``RERANK_LAB_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``) when set, else CUDA when available, else the
    CPU. ``InputError`` for a value torch does not know or a CUDA device torch cannot see."""
    name = os.environ.get(DEVICE_VARIABLE, "").strip()
    if not name:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise InputError(f"{DEVICE_VARIABLE}={name!r} is not a torch device (e.g. cpu, cuda, cuda:1)") from None
    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()):
        raise InputError(f"{DEVICE_VARIABLE}={name!r}, but torch sees {torch.cuda.device_count()} CUDA device(s)")
    return device


def amp_enabled() -> bool:
    """Whether ``RERANK_LAB_AMP`` asks for mixed precision (1, true, yes, on)."""
    return env_flag(AMP_VARIABLE)


def autocast_dtype(device: torch.device) -> torch.dtype:
    """float16 on CUDA (fastest on every CUDA GPU), bfloat16 on the CPU (the one it supports)."""
    return torch.float16 if device.type == "cuda" else torch.bfloat16


def precision(device: torch.device) -> contextlib.AbstractContextManager[object]:
    """``torch.autocast`` on ``device`` when ``amp_enabled()``, else nothing. Off by default: scores
    then move, by up to 2e-2 in bfloat16 (benchmarks/gpu_check.py reports how much and what it does
    to MAP, per ranker)."""
    if not amp_enabled():
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=autocast_dtype(device))


def describe(device: torch.device) -> str:
    """``GPU (<name>, <memory> GiB)`` for a CUDA device, else the device type in capitals (``CPU``)."""
    if device.type != "cuda":
        return device.type.upper()
    index = device.index if device.index is not None else torch.cuda.current_device()
    memory = torch.cuda.get_device_properties(index).total_memory / 2**30
    return f"GPU ({torch.cuda.get_device_name(index)}, {memory:.1f} GiB)"

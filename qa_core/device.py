"""Where neural rankers run: the GPU when there is one, else the CPU."""

from __future__ import annotations

import torch


def default_device() -> torch.device:
    """CUDA when available (training and scoring are then on the GPU), otherwise the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")

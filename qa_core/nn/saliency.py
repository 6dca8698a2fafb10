"""Gradient saliency over embedded inputs, for models whose explanation is "which words moved the score".

A frozen embedding table has no gradient, so the embedded words themselves are made the leaves to
differentiate; the norm of the gradient of P(relevant) at each word is its saliency.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


def embedded_saliency(
    score: Callable[..., torch.Tensor], embedded: Sequence[torch.Tensor]
) -> tuple[float, list[list[float]]]:
    """(score, one saliency list per input) for a single example.

    ``score`` maps the (1, length, dim) embedded inputs, in order, to a 1-element score tensor.
    """
    leaves = [tensor.detach().requires_grad_(True) for tensor in embedded]
    with torch.enable_grad():
        value = score(*leaves).reshape(())
        gradients = torch.autograd.grad(value, leaves)
    return float(value.detach()), [gradient[0].norm(dim=-1).tolist() for gradient in gradients]

"""Word attributions over embedded inputs through Captum (PyTorch's maintained attribution library).

A ranker's network reads word ids; attribution methods need the embedded words as the inputs to
vary. ``EmbeddedInputs`` holds them: the (1, length, dim) embedded texts of one pair and a
``forward`` that scores a batch of them (batch, length, dim) -> (batch,) relevance, so Integrated
Gradients can send its interpolation steps through the network in batches. Each method returns
one value per word of each input: the attribution summed over the embedding dimensions (signed: a
positive word raised the score), except ``gradient_norm``, the norm of the gradient at each word
(unsigned), the classic saliency map.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

# Captum is imported in each function that uses it: importing ``captum.attr`` pulls in matplotlib
# (its LLM views) and tqdm, which a GPU node without the project's stack lacks
# (benchmarks/gpu_check.py), and takes a second the request path need not pay up front.

IG_STEPS = 32  # Gauss-Legendre steps; the convergence delta is reported with the weights
IG_BATCH = 32  # interpolation steps per forward pass

WordAttributions = tuple[list[float], ...]  # one list per input, one value per word


@dataclass(frozen=True)
class EmbeddedInputs:
    """One pair's embedded texts (each (1, length, dim)) and the batched score over them."""

    inputs: tuple[torch.Tensor, ...]
    forward: Callable[..., torch.Tensor]

    def score(self) -> float:
        with torch.no_grad():
            return float(self.forward(*self.inputs).reshape(()))


def _leaves(embedded: EmbeddedInputs) -> tuple[torch.Tensor, ...]:
    """The inputs as fresh leaves that require gradients (Captum differentiates with respect to them)."""
    return tuple(x.detach().requires_grad_(True) for x in embedded.inputs)


def _per_word(attributions: tuple[torch.Tensor, ...]) -> WordAttributions:
    return tuple(a[0].sum(dim=-1).detach().cpu().double().tolist() for a in attributions)


def integrated_gradients(embedded: EmbeddedInputs, steps: int = IG_STEPS) -> tuple[WordAttributions, float]:
    """Integrated Gradients from the all-zero embedding (a padding word: what the models see for
    "no word") to the pair's words, ``steps`` steps in batches; with Captum's convergence delta
    (sum of attributions minus the score difference it should equal)."""
    from captum.attr import IntegratedGradients

    baselines = tuple(torch.zeros_like(x) for x in embedded.inputs)
    with torch.enable_grad():
        attributions, delta = IntegratedGradients(embedded.forward).attribute(
            _leaves(embedded), baselines=baselines, n_steps=steps, internal_batch_size=IG_BATCH,
            return_convergence_delta=True,
        )
    return _per_word(attributions), float(delta.abs().max())


def gradient_x_input(embedded: EmbeddedInputs) -> WordAttributions:
    """Gradient times input at each embedded word (first-order Taylor share of the score)."""
    from captum.attr import InputXGradient

    with torch.enable_grad():
        return _per_word(InputXGradient(embedded.forward).attribute(_leaves(embedded)))


def embedding_occlusion(embedded: EmbeddedInputs) -> WordAttributions:
    """Score drop when one word's vector is replaced by zeros (the padding vector), every word of
    every input in one batch."""
    from captum.attr import Occlusion

    windows = tuple((1, x.shape[-1]) for x in embedded.inputs)
    size = sum(x.shape[1] for x in embedded.inputs)
    with torch.no_grad():
        attributions = Occlusion(embedded.forward).attribute(
            embedded.inputs, sliding_window_shapes=windows, baselines=(0.0,) * len(windows), perturbations_per_eval=max(1, size)
        )
    # Captum gives each of a word's ``dim`` elements the whole drop; the word's drop is their mean.
    return tuple(a[0].mean(dim=-1).detach().cpu().double().tolist() for a in attributions)


def gradient_norm(embedded: EmbeddedInputs) -> tuple[WordAttributions, float]:
    """The norm of the score's gradient at each embedded word: the saliency SM-CNN and the overlap
    CNNs show as their own weights, with the score of the forward pass it differentiated (their
    explanation needs both: one pass, not a second one without gradients). Captum's ``Saliency`` is
    this one ``torch.autograd.grad`` call; calling torch keeps a model's own explanation working where
    Captum cannot be imported (a GPU node without matplotlib: benchmarks/gpu_check.py explains every
    ranker there)."""
    leaves = _leaves(embedded)
    with torch.enable_grad():
        score = embedded.forward(*leaves)
        gradients = torch.autograd.grad(score.sum(), leaves)
    return tuple(g[0].norm(dim=-1).detach().cpu().double().tolist() for g in gradients), float(score.detach().reshape(()))


@contextmanager
def substituted(embedding: nn.Module, substitutes: Mapping[torch.Tensor, torch.Tensor]) -> Iterator[None]:
    """While open, ``embedding`` called on one of the ``substitutes``' id tensors (or a view of its
    first columns, as ``trim_padding`` makes) returns the given vectors instead of looking them up:
    the way to feed a network varied embedded words through its usual ``forward`` on ids. Raises
    ``RuntimeError`` when the network did not embed every one of them (the substitution missed)."""
    by_storage = {ids.data_ptr(): (ids, vectors) for ids, vectors in substitutes.items()}
    used: set[int] = set()

    def hook(_module: nn.Module, args: tuple[torch.Tensor, ...], output: torch.Tensor) -> torch.Tensor:
        match = by_storage.get(args[0].data_ptr())
        if match is None:
            return output
        used.add(args[0].data_ptr())
        return match[1][:, : args[0].shape[1]].to(output.dtype)

    handle = embedding.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()
    if used != set(by_storage):
        raise RuntimeError("the network did not embed every substituted input")

"""Losses beyond plain cross-entropy, in the ``loss(model_output, targets)`` form the training loop calls."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class PairwiseHingeLoss(nn.Module):
    """max(0, M - s(q, a+) + s(q, a-)), averaged over the triples of a batch.

    Reads the batches of ``qa_core.training.batching.PairwiseBatches``: the model's scores are
    (2n,), the n positives first and then their n paired negatives; ``targets`` are n ones (the
    first of each pair should rank higher), the convention of ``torch.nn.MarginRankingLoss``,
    which computes the loss.
    """

    def __init__(self, margin: float):
        super().__init__()
        self.ranking = nn.MarginRankingLoss(margin=margin)

    def forward(self, scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        positives, negatives = scores.reshape(2, -1)
        return self.ranking(positives, negatives, targets.to(scores.dtype))


class StackedCrossEntropy(nn.Module):
    """Summed cross-entropy of several classifiers trained side by side on the same targets.

    The output is (batch, classifiers, classes) logits. Each classifier's term is the mean loss it
    would get alone, so with disjoint parameters each gets exactly the gradient it would get
    alone: they train as separate models on the same batches.
    """

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        _, classifiers, classes = logits.shape
        mean = F.cross_entropy(logits.reshape(-1, classes), targets.repeat_interleave(classifiers))
        return mean * classifiers

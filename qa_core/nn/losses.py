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


def group_log_softmax(scores: torch.Tensor, groups: torch.Tensor, count: int) -> torch.Tensor:
    """log softmax of (n,) scores within each group; ``groups`` holds group ids 0..count-1 per row."""
    largest = torch.full((count,), float("-inf"), dtype=scores.dtype, device=scores.device)
    largest = largest.scatter_reduce(0, groups, scores.detach(), reduce="amax")
    shifted = scores - largest[groups]
    totals = torch.zeros(count, dtype=scores.dtype, device=scores.device).index_add(0, groups, shifted.exp())
    return shifted - totals.log()[groups]


class ListwiseKLLoss(nn.Module):
    """KL(y || softmax(s)) over each question's pool, averaged over the pools of a batch (Wang &
    Jiang 2017): y is the pool's labels normalised to sum 1, softmax(s) the scores' distribution.

    Reads the batches of ``qa_core.training.listwise.QuestionBatches``: ``targets`` is (n, 2) with
    the row's pool id (0..k-1 within the batch) and its label. A pool without a relevant row has no
    target distribution and adds nothing (it is not counted in the mean either).
    """

    def forward(self, scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        groups = targets[:, 0].long()
        count = int(groups.max()) + 1
        labels = targets[:, 1].to(scores.dtype).clamp(min=0)
        mass = torch.zeros(count, dtype=scores.dtype, device=scores.device).index_add(0, groups, labels)
        wanted = labels / mass[groups].clamp(min=torch.finfo(scores.dtype).tiny)
        log_wanted = torch.where(wanted > 0, wanted, torch.ones_like(wanted)).log()
        terms = wanted * (log_wanted - group_log_softmax(scores, groups, count))
        per_pool = torch.zeros(count, dtype=scores.dtype, device=scores.device).index_add(0, groups, terms)
        usable = mass > 0
        return per_pool[usable].sum() / usable.sum().clamp(min=1)


class PointwiseLogisticLoss(nn.Module):
    """Binary cross-entropy of each row's score as a logit against relevant (label > 0): the
    pointwise counterpart of ``ListwiseKLLoss`` on the same batches (same ``targets`` layout)."""

    def forward(self, scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(scores, (targets[:, 1] > 0).to(scores.dtype))

"""Mini-batches of whole question pools, for listwise losses (``qa_core.nn.losses.ListwiseKLLoss``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from qa_core.training.batching import BatchRows, GroupedBatches


@dataclass
class QuestionBatches(GroupedBatches):
    """Every candidate row of ``per_batch`` questions per batch, questions in a fresh order each
    epoch (drawn with the epoch's generator, so reproducible under a seed).

    A batch's targets are (rows, 2) float: the row's question numbered 0..k-1 within the batch,
    and its label.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        _, numbered = torch.unique(self.groups, return_inverse=True)
        by_question = torch.argsort(numbered, stable=True)
        self._rows_of = list(torch.split(by_question, torch.bincount(numbered).tolist())) if len(numbered) else []

    @property
    def questions(self) -> int:
        return len(self._rows_of)

    units = questions  # what GroupedBatches cuts into batches

    def _epoch(self, generator: torch.Generator) -> BatchRows:
        return self._pools

    def _pools(self, questions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows of ``questions``, pool by pool, and their (pool number, label) targets."""
        chosen = [self._rows_of[g] for g in questions.tolist()]
        rows = torch.cat(chosen)
        pool = torch.cat([torch.full((len(r),), k, dtype=torch.float32) for k, r in enumerate(chosen)])
        return rows, torch.stack([pool, self.labels[rows].to(torch.float32)], dim=1)

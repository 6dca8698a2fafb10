"""Mini-batches of whole question pools, for listwise losses (``qa_core.nn.losses.ListwiseKLLoss``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from qa_core.training.batching import Batch, batch_count, check_rows, cut


@dataclass
class QuestionBatches:
    """Every candidate row of ``questions_per_batch`` questions per batch, questions in a fresh order
    each epoch (drawn with the epoch's generator, so reproducible under a seed).

    ``inputs`` hold one row per candidate, ``groups`` the question of each row (any ids) and
    ``labels`` its grade. A batch's targets are (rows, 2) float: the row's question numbered
    0..k-1 within the batch, and its label.
    """

    inputs: dict[str, torch.Tensor]
    groups: torch.Tensor
    labels: torch.Tensor
    questions_per_batch: int

    def __post_init__(self) -> None:
        check_rows(self.inputs, self.groups, self.labels)
        _, numbered = torch.unique(self.groups, return_inverse=True)
        by_question = torch.argsort(numbered, stable=True)
        self._rows_of = list(torch.split(by_question, torch.bincount(numbered).tolist())) if len(numbered) else []

    @property
    def questions(self) -> int:
        return len(self._rows_of)

    def __len__(self) -> int:
        return batch_count(self.questions, self.questions_per_batch)

    def __call__(self, generator: torch.Generator) -> Iterator[Batch]:
        order = torch.randperm(self.questions, generator=generator).tolist()
        device = next(iter(self.inputs.values())).device
        for questions in cut(order, self.questions_per_batch):
            chosen = [self._rows_of[g] for g in questions]
            rows = torch.cat(chosen)
            pool = torch.cat([torch.full((len(r),), k, dtype=torch.float32) for k, r in enumerate(chosen)])
            targets = torch.stack([pool, self.labels[rows].to(torch.float32)], dim=1)
            rows = rows.to(device)
            yield {name: tensor[rows] for name, tensor in self.inputs.items()}, targets.to(device)

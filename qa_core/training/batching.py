"""Padding and mini-batching of already-encoded examples, shared by every neural ranker."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from qa_core.nn.encoders import PAD_ID

Batch = tuple[dict[str, torch.Tensor], torch.Tensor]
"""Model inputs by keyword (``model(**inputs)``) and the targets of the loss."""

BatchRows = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
"""A batch's units (triples, questions) -> its candidate rows and the targets of the loss."""


def pad_ids(sequences: Sequence[Sequence[int]], max_len: int | None = None) -> torch.Tensor:
    """Right-pad id lists with PAD into a (count, length) long tensor; truncate at ``max_len``.

    Length is at least 1 so that an empty text still yields a well-formed row.
    """
    rows = [list(seq[:max_len] if max_len is not None else seq) for seq in sequences]
    length = max([len(row) for row in rows] + [1])
    padded = torch.full((len(rows), length), PAD_ID, dtype=torch.long)
    for i, row in enumerate(rows):
        padded[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return padded


def trim_padding(ids: torch.Tensor) -> torch.Tensor:
    """Drop trailing columns that are PAD in every row: a batch costs its own longest text only."""
    used = (ids != PAD_ID).any(dim=0).nonzero()
    length = int(used.max()) + 1 if used.numel() else 1
    return ids[:, :length]


def check_rows(inputs: dict[str, torch.Tensor], groups: torch.Tensor, labels: torch.Tensor) -> None:
    """``ValueError`` unless every input tensor, the groups and the labels have one row per candidate."""
    sizes = {name: len(tensor) for name, tensor in inputs.items()}
    if any(size != len(groups) or size != len(labels) for size in sizes.values()):
        raise ValueError(f"inputs, groups and labels differ in length: {sizes}, groups {len(groups)}, labels {len(labels)}")


def batch_count(units: int, per_batch: int) -> int:
    """Mini-batches in an epoch of ``units`` (rows, triples or questions) cut ``per_batch`` at a time."""
    return -(-units // per_batch)


def cut(order: Sequence[int] | torch.Tensor, per_batch: int) -> Iterator[Any]:
    """An epoch's order of units cut into consecutive batches of ``per_batch`` (the last may be shorter)."""
    for start in range(0, len(order), per_batch):
        yield order[start : start + per_batch]


@dataclass
class TensorBatches:
    """Row-aligned input tensors and targets, cut into mini-batches in a fresh order each epoch.

    Calling it with a seeded ``torch.Generator`` yields one epoch; ``len`` is batches per epoch.
    The tensors may live on the GPU: only the index permutation is drawn on the CPU.
    """

    inputs: dict[str, torch.Tensor]
    targets: torch.Tensor
    batch_size: int
    shuffle: bool = True

    def __post_init__(self) -> None:
        sizes = {name: len(tensor) for name, tensor in self.inputs.items()}
        if any(size != len(self.targets) for size in sizes.values()):
            raise ValueError(f"inputs and targets differ in length: {sizes}, targets {len(self.targets)}")

    def __len__(self) -> int:
        return batch_count(len(self.targets), self.batch_size)

    def __call__(self, generator: torch.Generator) -> Iterator[Batch]:
        count = len(self.targets)
        order = torch.randperm(count, generator=generator) if self.shuffle else torch.arange(count)
        for chosen in cut(order, self.batch_size):
            index = chosen.to(self.targets.device)
            yield {name: tensor[index] for name, tensor in self.inputs.items()}, self.targets[index]


@dataclass
class GroupedBatches(ABC):
    """Candidate rows grouped by question, cut each epoch into batches of ``per_batch`` units (a
    triple, a whole question) in a fresh order drawn with the epoch's generator, so reproducible
    under a seed: the epoch arithmetic and the rows' inputs of ``PairwiseBatches`` and
    ``listwise.QuestionBatches``, which say what a unit is.

    ``inputs`` hold one row per candidate, ``groups`` the question of each row (any ids) and
    ``labels`` its grade.
    """

    inputs: dict[str, torch.Tensor]
    groups: torch.Tensor
    labels: torch.Tensor
    per_batch: int

    def __post_init__(self) -> None:
        check_rows(self.inputs, self.groups, self.labels)

    @property
    @abstractmethod
    def units(self) -> int:
        """Units an epoch cuts into batches."""

    @abstractmethod
    def _epoch(self, generator: torch.Generator) -> BatchRows:
        """Draw what the epoch needs before its order (nothing, or a pairwise epoch's distractors);
        returns how a batch's units become its candidate rows and targets."""

    def __len__(self) -> int:
        return batch_count(self.units, self.per_batch)

    def __call__(self, generator: torch.Generator) -> Iterator[Batch]:
        batch_of = self._epoch(generator)
        order = torch.randperm(self.units, generator=generator)
        device = next(iter(self.inputs.values())).device
        for chosen in cut(order, self.per_batch):
            rows, targets = batch_of(chosen)
            rows = rows.to(device)
            yield {name: tensor[rows] for name, tensor in self.inputs.items()}, targets.to(device)


@dataclass
class PairwiseBatches(GroupedBatches):
    """Triples (question, relevant candidate, sampled irrelevant candidate) for a ranking loss.

    ``labels`` > 0 mark the relevant rows. Each epoch pairs every relevant row with one
    irrelevant row of its own group, drawn uniformly with the epoch's generator (so the
    distractors are resampled every epoch, reproducibly under a seed), and yields batches of
    ``per_batch`` triples in a fresh order. A batch's inputs are ``2n`` rows: the n relevant rows,
    then their n distractors; its targets are n ones (see ``qa_core.nn.losses.PairwiseHingeLoss``).
    A group without a relevant or without an irrelevant row gives no triple.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        rows = list(enumerate(zip(self.groups.tolist(), self.labels.tolist())))
        negatives_of: dict[int, list[int]] = {}
        for row, (group, label) in rows:
            if label <= 0:
                negatives_of.setdefault(group, []).append(row)
        # Each group's distractors are one slice [start, start + count) of a flat row list.
        flat: list[int] = []
        slices: dict[int, tuple[int, int]] = {}
        for group, negatives in negatives_of.items():
            slices[group] = (len(flat), len(negatives))
            flat.extend(negatives)
        positives = [(row, slices[group]) for row, (group, label) in rows if label > 0 and group in slices]
        self.positives = torch.tensor([row for row, _ in positives], dtype=torch.long)
        self._negatives = torch.tensor(flat, dtype=torch.long)
        self._starts = torch.tensor([start for _, (start, _) in positives], dtype=torch.long)
        self._counts = torch.tensor([count for _, (_, count) in positives], dtype=torch.long)

    @property
    def triples(self) -> int:
        """Triples per epoch: the relevant rows whose group has an irrelevant row."""
        return len(self.positives)

    units = triples  # what GroupedBatches cuts into batches

    def _epoch(self, generator: torch.Generator) -> BatchRows:
        draw = torch.rand(self.triples, generator=generator, dtype=torch.float64)
        picked = self._negatives[self._starts + torch.minimum((draw * self._counts).long(), self._counts - 1)]
        return lambda chosen: (torch.cat([self.positives[chosen], picked[chosen]]), torch.ones(len(chosen)))

"""Padding and mini-batching of already-encoded examples, shared by every neural ranker."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from qa_core.nn.encoders import PAD_ID

Batch = tuple[dict[str, torch.Tensor], torch.Tensor]
"""Model inputs by keyword (``model(**inputs)``) and the targets of the loss."""


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
        return -(-len(self.targets) // self.batch_size)

    def __call__(self, generator: torch.Generator) -> Iterator[Batch]:
        count = len(self.targets)
        order = torch.randperm(count, generator=generator) if self.shuffle else torch.arange(count)
        for start in range(0, count, self.batch_size):
            index = order[start : start + self.batch_size].to(self.targets.device)
            yield {name: tensor[index] for name, tensor in self.inputs.items()}, self.targets[index]

"""Torch building blocks shared by the neural rankers and the question classifiers.

Embedding and encoding are separate modules on purpose: one frozen table can feed several
encoders without being stored twice, and gradient saliency needs the embedded input as a leaf.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

PAD_ID = 0  # qa_core.text.vectors.Vocabulary reserves id 0 for padding


class WordEmbedding(nn.Module):
    """Lookup table initialised from pretrained vectors; frozen unless ``trainable``.

    A frozen table is a non-persistent buffer, not a parameter: no optimizer, weight decay or
    parameter count ever sees it, and checkpoints store the vectors once, next to the state_dict.
    """

    def __init__(self, vectors: torch.Tensor, *, trainable: bool = False):
        super().__init__()
        vectors = torch.as_tensor(vectors, dtype=torch.float32)
        self.trainable = trainable
        if trainable:
            self.weight = nn.Parameter(vectors.clone())
        else:
            self.register_buffer("weight", vectors.clone(), persistent=False)

    @property
    def dim(self) -> int:
        return self.weight.shape[1]

    def append_rows(self, vectors: torch.Tensor) -> None:
        """Grow a frozen table by new words' vectors (open-vocabulary scoring; see ``rankers.neural``)."""
        if self.trainable:
            raise ValueError("a trainable table cannot grow: appended rows would be untrained")
        rows = torch.as_tensor(vectors, dtype=self.weight.dtype, device=self.weight.device)
        self.weight = torch.cat([self.weight, rows])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """(batch, length) ids -> (batch, length, dim) vectors; PAD rows come out as zeros."""
        return F.embedding(ids, self.weight, padding_idx=PAD_ID) * (ids != PAD_ID).unsqueeze(-1)


class ConvEncoder(nn.Module):
    """Wide 1-D convolution over words, ReLU, max-pooling over time (Severyn & Moschitti 2015).

    "Wide" means ``width - 1`` zeros on each side, so a sentence of ``n`` words gives ``n + width - 1``
    feature columns and the edge words are seen by as many filters as the middle ones.
    """

    def __init__(self, dim: int, filters: int = 100, width: int = 5):
        super().__init__()
        self.width = width
        self.conv = nn.Conv1d(dim, filters, kernel_size=width, padding=width - 1)

    @property
    def filters(self) -> int:
        return self.conv.out_channels

    def feature_maps(self, embedded: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(batch, length, dim) and a (batch, length) bool mask -> (batch, filters, length + width - 1).

        Padded positions are zeroed first, so a padded sentence's first ``n + width - 1`` columns
        equal those of the same sentence alone.
        """
        embedded = embedded * mask.unsqueeze(-1).to(embedded.dtype)
        return torch.relu(self.conv(embedded.transpose(1, 2)))

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Max over the ``n + width - 1`` real columns of each sentence (right padding assumed)."""
        maps = self.feature_maps(embedded, mask)
        valid_columns = mask.sum(dim=1, keepdim=True) + self.width - 1
        column = torch.arange(maps.shape[-1], device=maps.device).unsqueeze(0)
        return masked_max(maps, column < valid_columns)


def masked_max(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Max of (batch, channels, time) over time, where ``valid`` (batch, time) is True.

    Invalid columns are set to -inf, so padding can never win the max (ReLU(bias) could).
    """
    hidden = values.masked_fill(~valid.unsqueeze(1), float("-inf"))
    return hidden.max(dim=-1).values

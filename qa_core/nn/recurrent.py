"""LSTM reading of padded word sequences, shared by the attention LSTM and global-local attention.

Padding is handled with packed sequences: the LSTM never steps over a padding position, so the
final state of a row is the state after its last real word, and a padded row encodes exactly as
the same text alone (up to floating-point summation order).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from qa_core.nn.encoders import PAD_ID


def read_mask(ids: torch.Tensor) -> torch.Tensor:
    """(batch, length) bool mask of the positions a reader reads: the real words, right-padded.

    An empty text (a row of PAD only) reads its first position, a zero vector, so that every row
    has at least one step to encode and one position to attend to.
    """
    mask = ids != PAD_ID
    mask[:, 0] |= ~mask.any(dim=1)
    return mask


class LSTMEncoder(nn.Module):
    """One LSTM layer (optionally bidirectional) over embedded words with a right-padding mask."""

    def __init__(self, dim: int, hidden: int, *, bidirectional: bool = False):
        super().__init__()
        self.lstm = nn.LSTM(dim, hidden, batch_first=True, bidirectional=bidirectional)

    @property
    def directions(self) -> int:
        return 2 if self.lstm.bidirectional else 1

    @property
    def output_dim(self) -> int:
        return self.directions * self.lstm.hidden_size

    def forward(
        self, embedded: torch.Tensor, mask: torch.Tensor, initial_cell: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """(batch, length, dim) words and a ``read_mask`` -> states and the final (hidden, cell).

        States are (batch, length, output_dim), zero at padding. The final hidden and cell states
        are (batch, output_dim): each direction's state after the last real word it read (for the
        backward direction, after the first word). ``initial_cell`` (batch, output_dim) sets the
        cell state the LSTM starts from (the hidden state starts at zero): conditional encoding.
        """
        batch, length, _ = embedded.shape
        lengths = mask.sum(dim=1).cpu()
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        start = None
        if initial_cell is not None:
            cell = initial_cell.reshape(batch, self.directions, -1).transpose(0, 1).contiguous()
            start = (torch.zeros_like(cell), cell)
        output, (hidden, cell) = self.lstm(packed, start)
        states, _ = pad_packed_sequence(output, batch_first=True, total_length=length)
        return states, (self._by_row(hidden), self._by_row(cell))

    @staticmethod
    def _by_row(state: torch.Tensor) -> torch.Tensor:
        """(directions, batch, hidden) -> (batch, directions * hidden), forward direction first."""
        return state.transpose(0, 1).reshape(state.shape[1], -1)

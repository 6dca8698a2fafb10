"""Attention over a padded sequence of states: a masked softmax and the additive (MLP) scorer."""

from __future__ import annotations

import torch
from torch import nn


def masked_softmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax of (batch, length) logits over the positions where ``mask`` is True.

    Masked positions get exactly 0 (their logit is -inf before the softmax), so padding neither
    receives weight nor shifts the weights of real words. Every row needs one True position
    (``qa_core.nn.recurrent.read_mask`` guarantees it).
    """
    return torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)


class MLPAttention(nn.Module):
    """beta_i = softmax_i(w^T tanh(W_k k_i + W_q q + b)): one tanh hidden layer over [key; query].

    The additive attention of Bahdanau et al. (2014) and Rocktaeschel et al. (2016), as the
    attention LSTM of Romeo et al. (2016) uses it; ``W_k k_i + W_q q`` is one linear layer on the
    concatenation, split so that the query is projected once per row, not once per key.
    """

    def __init__(self, key_dim: int, query_dim: int, hidden: int):
        super().__init__()
        self.keys = nn.Linear(key_dim, hidden, bias=False)
        self.query = nn.Linear(query_dim, hidden)
        self.score = nn.Linear(hidden, 1, bias=False)

    def forward(self, keys: torch.Tensor, query: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(batch, length, key_dim) keys, (batch, query_dim) query, (batch, length) mask -> (batch, length) weights."""
        hidden = torch.tanh(self.keys(keys) + self.query(query).unsqueeze(1))
        return masked_softmax(self.score(hidden).squeeze(-1), mask)


def attend(states: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Weighted sum of (batch, length, dim) states with (batch, length) weights -> (batch, dim)."""
    return torch.bmm(weights.unsqueeze(1), states).squeeze(1)

"""Attention LSTM (Romeo et al., COLING 2016, after Hsu et al. 2016 and Rocktaeschel et al. 2016):
a pair classifier whose attention weights say which words of each text mattered. See
``shared/papers/attention-lstm-cqa.md``; every choice below follows it unless noted.

The network (``AttentionLSTM``): LSTM_o reads the first text; its final memory cell initialises
LSTM_s, which reads the second (its hidden state starts at zero: the paper passes the cell only).
Attention over the first text's states, beta_i = softmax_i(a(h_o,i, h_s,N)) with a() an MLP with
one tanh hidden layer, gives h_o = sum_i beta_i h_o,i; an MLP with one tanh hidden layer on
[h_o; h_s,N; one-hot(first-stage rank)] and a softmax classify the pair, trained with cross-entropy.

The paper's two models. Attention is one-sided, on the text read first, so the paper trains a
second model "with attention on q_s" for the candidate's weights. Here ``attend_on`` is that
switch: "question" reads the question first (the paper's model), "answer" swaps the two texts, so
the candidate is read first and attended over, conditioned on the question's final state. The
ranker always trains both, side by side in one network on the same batches (each with its own
loss, so each learns exactly as it would alone): ``explain`` needs both, since the app and the
attention-based tree pruning use the weights of both texts. ``score_with`` says what ranks:
"both" (default, the mean of the two models' P(relevant)), "question" or "answer" (one model).
The default was chosen on dev MAP: the mean beat either model alone on TrecQA and WikiQA DEV
(``benchmarks/recurrent_selection.py``).

First-stage rank. A one-hot of ``rank_slots + 1`` slots: slot r for rank r in 1..rank_slots,
slot 0 ("no rank") when the candidate has no first-stage rank or one beyond ``rank_slots``
(SemEval pools have 10 candidates). A slot that no training pair used is read as slot 0 too: its
weights were never trained, so a model trained without ranks (TrecQA, WikiQA) ignores the ranks
a BM25 first stage gives the app's candidates instead of adding untrained weights to them.

Hyper-parameters are not in the paper: the defaults below (LSTMs, attention and classifier layers
of 100 units, dropout 0.3, Adam at 1e-3, 50 pairs a batch) had the best mean dev MAP over TrecQA
and WikiQA DEV among the settings ``benchmarks/recurrent_selection.py`` tries.

Padding is masked everywhere: packed sequences (``qa_core.nn.recurrent``) and a masked softmax,
so padding changes no score and gets no weight.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from qa_core.classifiers.analysis import QuestionAnalyzer
from qa_core.nn.attention import MLPAttention, attend
from qa_core.nn.encoders import WordEmbedding
from qa_core.nn.losses import StackedCrossEntropy
from qa_core.nn.recurrent import LSTMEncoder, read_mask
from qa_core.rankers.base import Explanation
from qa_core.rankers.neural import NEURAL, NeuralConfig, NeuralRanker, Pair, spread, token_positions
from qa_core.text.links import lexical_links
from qa_core.training.batching import trim_padding
from qa_core.types import InputError, Question

SIDES = ("question", "answer")
NO_RANK = 0


def rank_slot(rank: int | None, slots: int) -> int:
    """One-hot slot of a first-stage rank: the rank itself in 1..slots, else ``NO_RANK``."""
    return rank if rank is not None and 1 <= rank <= slots else NO_RANK


@dataclass(frozen=True)
class AttentionLSTMConfig(NeuralConfig):
    """Sizes and training settings (none given by the paper; chosen on dev MAP)."""

    hidden: int = 100
    attention_hidden: int = 100
    classifier_hidden: int = 100
    rank_slots: int = 10
    dropout: float = 0.3
    learning_rate: float = 1e-3
    score_with: str = "both"  # "both", "question" or "answer"
    eval_every: int = 30

    def __post_init__(self) -> None:
        if self.score_with not in ("both", *SIDES):
            raise InputError(f"score_with must be 'both', 'question' or 'answer', got {self.score_with!r}")


class AttentionLSTM(nn.Module):
    """One of the paper's two models over embedded words; ``attend_on`` picks the attended text."""

    def __init__(
        self,
        dim: int,
        hidden: int,
        attention_hidden: int,
        classifier_hidden: int,
        rank_slots: int,
        dropout: float,
        attend_on: str,
    ):
        super().__init__()
        if attend_on not in SIDES:
            raise ValueError(f"attend_on must be one of {SIDES}, got {attend_on!r}")
        self.attend_on = attend_on
        self.rank_slots = rank_slots
        self.first_reader = LSTMEncoder(dim, hidden)  # LSTM_o: reads the attended text
        self.second_reader = LSTMEncoder(dim, hidden)  # LSTM_s: starts from LSTM_o's final cell
        self.attention = MLPAttention(hidden, hidden, attention_hidden)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Sequential(
            nn.Linear(2 * hidden + rank_slots + 1, classifier_hidden),
            nn.Tanh(),
            nn.Dropout(dropout),
            nn.Linear(classifier_hidden, 2),
        )

    def forward(
        self,
        question: torch.Tensor,
        question_mask: torch.Tensor,
        answer: torch.Tensor,
        answer_mask: torch.Tensor,
        rank: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Embedded texts, ``read_mask``s and rank slots -> (batch, 2) logits and the attention weights.

        The weights are (batch, length) over the attended text (the question or the answer).
        """
        if self.attend_on == "question":
            first, first_mask, second, second_mask = question, question_mask, answer, answer_mask
        else:
            first, first_mask, second, second_mask = answer, answer_mask, question, question_mask
        states, (_, cell) = self.first_reader(first, first_mask)
        _, (last, _) = self.second_reader(second, second_mask, initial_cell=cell)
        weights = self.attention(states, last, first_mask)
        rank_one_hot = F.one_hot(rank, self.rank_slots + 1).to(last.dtype)
        features = torch.cat([self.dropout(attend(states, weights)), self.dropout(last), rank_one_hot], dim=-1)
        return self.classifier(features), weights


class AttentionLSTMPair(nn.Module):
    """Both models (attention on the question, attention on the answer) over one frozen table."""

    def __init__(self, vectors: torch.Tensor, config: AttentionLSTMConfig):
        super().__init__()
        self.embedding = WordEmbedding(vectors, trainable=config.trainable_embeddings)
        self.models = nn.ModuleDict(
            {
                side: AttentionLSTM(
                    self.embedding.dim,
                    config.hidden,
                    config.attention_hidden,
                    config.classifier_hidden,
                    config.rank_slots,
                    config.dropout,
                    attend_on=side,
                )
                for side in SIDES
            }
        )

    def attend(
        self, question: torch.Tensor, answer: torch.Tensor, rank: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Padded ids and rank slots -> (batch, 2 models, 2) logits and each model's weights by side."""
        question, answer = trim_padding(question), trim_padding(answer)
        q_mask, a_mask = read_mask(question), read_mask(answer)
        q_words, a_words = self.embedding(question), self.embedding(answer)
        outputs = {side: model(q_words, q_mask, a_words, a_mask, rank) for side, model in self.models.items()}
        logits = torch.stack([outputs[side][0] for side in SIDES], dim=1)
        return logits, {side: outputs[side][1] for side in SIDES}

    def forward(self, question: torch.Tensor, answer: torch.Tensor, rank: torch.Tensor) -> torch.Tensor:
        return self.attend(question, answer, rank)[0]


class AttentionLSTMRanker(NeuralRanker):
    name = "attention_lstm"
    title = "Attention LSTM, q_o/q_s models (Romeo et al. 2016)"
    config_class = AttentionLSTMConfig
    capabilities = replace(NEURAL, reads=frozenset({"first_stage_rank"}))
    config: AttentionLSTMConfig

    def __init__(self, config: AttentionLSTMConfig | None = None):
        super().__init__(config)
        self.rank_slots_seen: set[int] = {NO_RANK}

    def build_model(self, vectors: torch.Tensor) -> AttentionLSTMPair:
        return AttentionLSTMPair(vectors, self.config)

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=self.config.learning_rate)

    def loss(self) -> nn.Module:
        return StackedCrossEntropy()

    def relevance(self, output: torch.Tensor) -> torch.Tensor:
        """P(relevant) of the model(s) ``score_with`` names (float64: near-certain pairs must not tie)."""
        relevant = torch.softmax(output.double(), dim=-1)[..., 1]
        if self.config.score_with == "both":
            return relevant.mean(dim=1)
        return relevant[:, SIDES.index(self.config.score_with)]

    # ------------------------------------------------------------------ first-stage rank

    def prepare(
        self, train: Sequence[Question], dev: Sequence[Question], seed: int, analyzer: QuestionAnalyzer | None
    ) -> None:
        """Record the rank slots the training pairs use (see the module docstring)."""
        slots = self.config.rank_slots
        used = {rank_slot(c.first_stage_rank, slots) for q in train for c in q.candidates if c.label is not None}
        self.rank_slots_seen = {NO_RANK, *used}

    def extra_state(self) -> dict[str, Any]:
        return {"rank_slots_seen": sorted(self.rank_slots_seen)}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.rank_slots_seen = set(state.get("rank_slots_seen", [NO_RANK]))

    def extra_inputs(self, pairs: Sequence[Pair]) -> dict[str, torch.Tensor]:
        slots = [rank_slot(p.first_stage_rank, self.config.rank_slots) for p in pairs]
        return {"rank": torch.tensor([s if s in self.rank_slots_seen else NO_RANK for s in slots], dtype=torch.long)}

    # ------------------------------------------------------------------ explanations

    def explain_pair(self, pair: Pair) -> Explanation:
        """Attention weights of both texts: the question's from the model attending on the question,
        the candidate's from the one attending on the candidate (each sums to 1 over the words read).
        """
        model = self.model()
        model.eval()
        inputs = {name: tensor.to(self._device) for name, tensor in self.encode([pair]).items()}
        with torch.inference_mode():
            logits, weights = model.attend(**inputs)
            score = float(self.relevance(logits)[0])
        cfg = self.config
        q_parsed, a_parsed = pair.question, pair.answer
        q_positions = token_positions(q_parsed, cfg.max_question_len)
        a_positions = token_positions(a_parsed, cfg.max_answer_len)
        return Explanation(
            score=score,
            question_tokens=list(q_parsed.tokens),
            answer_tokens=list(a_parsed.tokens),
            question_weights=spread(weights["question"][0].tolist(), q_positions, len(q_parsed.tokens)),
            answer_weights=spread(weights["answer"][0].tolist(), a_positions, len(a_parsed.tokens)),
            weight_kind="attention",
            links=lexical_links(q_parsed, a_parsed),
        )

"""Compare-aggregate (Wang & Jiang, ICLR 2017) with a listwise loss, plus word-level channels.

The network (``CompareAggregate``), per (question, answer) pair, written from the paper:

1. Preprocessing gates, shared by both texts: x_bar = sigmoid(W_i x + b_i) * tanh(W_u x + b_u), where
   x is a word's GloVe vector (50-d, frozen) and, with ``contextual``, spaCy's 96-d ``doc.tensor``
   row for that token (``qa_core.text.contextual``); dropout on x.
2. Word-by-word attention: for answer word j, G_ij = softmax_i((W_g q_bar_i + b_g) . a_bar_j) over
   the question's words (padding masked: it never gets weight), h_j = sum_i G_ij q_bar_i.
3. Comparison SUBMULT+NN, the paper's best: t_j = ReLU(W_t [(a_bar_j - h_j)^2; a_bar_j * h_j] + b_t).
4. Channels (this project's additions, each switchable for the ablations) appended to t_j:
   ``exact_match``: 1 if the answer word (normalised, not punctuation) occurs in the question, and
   that times idf(word) / max idf (IDF over the training candidates); ``answer_type``: a learned
   5-d embedding of the question class on answer words inside a named entity whose type fits the
   class (the REL-FOCUS answer-type match; ``cnn_overlap.answer_semantic_ids``), 0 elsewhere.
5. Aggregation: convolutions of widths 1-5 (``hidden`` filters each, ReLU, max over the answer's
   positions; the shared wide, masked ``ConvEncoder``), concatenated, tanh layer, one linear score.

Loss: ``listwise`` is KL(labels / sum(labels) || softmax over the question's pool of scores), with
batches of whole questions (``QuestionBatches``) as in the paper; ``pointwise`` is the ablation:
logistic loss per pair on the same batches. Adamax (the paper's optimizer); the state with the
best dev MAP is kept (the shared loop).

Deviations: GloVe 6B 50d instead of 840B 300d (the only vectors here); ``hidden`` (the paper's l)
64 instead of 150, for the CPU budget of the ablations on a shared 2-core machine (the convolutions
cost ~hidden^2 per word; 64 is still wider than the 50-d word vectors it reads); lr 0.002 and dropout 0.3 are the public code's SNLI command line (no WikiQA setting is given);
texts capped at 40 question / 80 answer words; the paper's narrow convolution over answers padded
to 5 words is replaced by the masked wide one (same receptive fields, no pad words).

Question class and focus come from the ``QuestionAnalyzer`` passed in (trained classifiers), else
the wh-word rules; it is saved in the checkpoint, so a loaded model analyses questions as in training.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from qa_core.data.questions import COARSE_CLASSES
from qa_core.nn.attention import masked_softmax
from qa_core.nn.encoders import PAD_ID, ConvEncoder, WordEmbedding
from qa_core.nn.losses import ListwiseKLLoss, PointwiseLogisticLoss
from qa_core.nn.recurrent import read_mask
from qa_core.rankers.analysis_channel import AnalysisReadingRanker
from qa_core.rankers.base import Explanation
from qa_core.rankers.cnn_overlap import answer_semantic_ids
from qa_core.rankers.neural import NEURAL, NeuralConfig, Pair, spread, token_positions
from qa_core.structure.rel import rel_tag
from qa_core.text.contextual import CONTEXT_DIM, token_vectors
from qa_core.text.features import IdfTable
from qa_core.text.nlp import Parsed
from qa_core.text.vectors import normalize
from qa_core.training import loop
from qa_core.training.batching import pad_ids, trim_padding
from qa_core.training.listwise import QuestionBatches
from qa_core.types import InputError

LOSSES = ("listwise", "pointwise")
MATCH_FEATURES = 2  # exact match, IDF-weighted exact match


@dataclass(frozen=True)
class CompareAggregateConfig(NeuralConfig):
    """Sizes and training (see the module docstring); channels on by default. ``batch_size`` counts questions."""

    hidden: int = 64
    windows: tuple[int, ...] = (1, 2, 3, 4, 5)
    dropout: float = 0.3
    lr: float = 0.002
    type_dim: int = 5
    exact_match: bool = True
    answer_type: bool = True
    contextual: bool = True
    loss: str = "listwise"
    batch_size: int = 10
    max_epochs: int = 6
    patience: int = 2
    eval_every: int = 20
    max_question_len: int = 40
    max_answer_len: int = 80
    score_batch_size: int = 250

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise InputError(f"loss must be one of {', '.join(LOSSES)}, not {self.loss!r}")


class CompareAggregate(nn.Module):
    """The network of the module docstring; ``forward`` gives one score per row."""

    def __init__(self, vectors: torch.Tensor, config: CompareAggregateConfig):
        super().__init__()
        hidden = config.hidden
        self.embedding = WordEmbedding(vectors, trainable=config.trainable_embeddings)
        self.contextual = config.contextual
        word_dim = self.embedding.dim + (CONTEXT_DIM if config.contextual else 0)
        self.dropout = nn.Dropout(config.dropout)
        self.gate = nn.Linear(word_dim, hidden)
        self.value = nn.Linear(word_dim, hidden)
        self.attention = nn.Linear(hidden, hidden)
        self.compare = nn.Linear(2 * hidden, hidden)
        self.exact_match = config.exact_match
        self.answer_type = nn.Embedding(len(COARSE_CLASSES) + 1, config.type_dim) if config.answer_type else None
        channels = hidden + (MATCH_FEATURES if config.exact_match else 0) + (config.type_dim if config.answer_type else 0)
        self.aggregators = nn.ModuleList(ConvEncoder(channels, hidden, width) for width in config.windows)
        self.aggregate = nn.Linear(len(config.windows) * hidden, hidden)
        self.score = nn.Linear(hidden, 1)

    def preprocess(self, ids: torch.Tensor, context: torch.Tensor | None) -> torch.Tensor:
        """(batch, length) ids (+ context rows) -> (batch, length, hidden) gated word vectors."""
        words = self.embedding(ids)
        if self.contextual:
            words = torch.cat([words, context[:, : ids.shape[1]].to(words.dtype)], dim=-1)
        words = self.dropout(words)
        return torch.sigmoid(self.gate(words)) * torch.tanh(self.value(words))

    def compare_words(
        self,
        question: torch.Tensor,
        answer: torch.Tensor,
        question_mask: torch.Tensor,
        question_context: torch.Tensor | None,
        answer_context: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention G (batch, answer, question) over the real question words, and t (batch, answer, hidden)."""
        q_bar = self.preprocess(question, question_context)
        a_bar = self.preprocess(answer, answer_context)
        logits = a_bar @ self.attention(q_bar).transpose(1, 2)
        attention = masked_softmax(logits, question_mask.unsqueeze(1))
        attended = attention @ q_bar
        compared = torch.relu(self.compare(torch.cat([(a_bar - attended).square(), a_bar * attended], dim=-1)))
        return attention, compared

    def channels(self, compared: torch.Tensor, answer_match: torch.Tensor, answer_type: torch.Tensor) -> torch.Tensor:
        """t_j with the enabled word channels appended."""
        length = compared.shape[1]
        parts = [compared]
        if self.exact_match:
            parts.append(answer_match[:, :length].to(compared.dtype))
        if self.answer_type is not None:
            parts.append(self.answer_type(answer_type[:, :length]))
        return torch.cat(parts, dim=-1)

    def pooled_maps(self, features: torch.Tensor, answer_mask: torch.Tensor) -> list[torch.Tensor]:
        """Each window's (batch, hidden) max-pooled feature maps."""
        return [aggregator(features, answer_mask) for aggregator in self.aggregators]

    def forward(
        self,
        question: torch.Tensor,
        answer: torch.Tensor,
        answer_match: torch.Tensor | None = None,
        answer_type: torch.Tensor | None = None,
        question_context: torch.Tensor | None = None,
        answer_context: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Padded ids and the enabled channels' inputs -> (batch,) scores."""
        question, answer = trim_padding(question), trim_padding(answer)
        _, compared = self.compare_words(question, answer, read_mask(question), question_context, answer_context)
        features = self.channels(compared, answer_match, answer_type)
        pooled = torch.cat(self.pooled_maps(features, answer != PAD_ID), dim=-1)
        return self.score(torch.tanh(self.aggregate(pooled))).squeeze(-1)

    def pooling_credit(self, features: torch.Tensor, answer_mask: torch.Tensor) -> torch.Tensor:
        """(batch, answer) share of the max-pooled features each answer word feeds: every filter's
        winning column spreads 1 over the real words it covers; rows sum to 1."""
        batch, length = answer_mask.shape
        credit = torch.zeros(batch, length, dtype=features.dtype, device=features.device)
        lengths = answer_mask.sum(dim=1, keepdim=True)
        for aggregator in self.aggregators:
            width = aggregator.width
            maps = aggregator.feature_maps(features, answer_mask)
            column = torch.arange(maps.shape[-1], device=maps.device).unsqueeze(0)
            valid = column < lengths + width - 1
            winners = maps.masked_fill(~valid.unsqueeze(1), float("-inf")).argmax(dim=-1)  # (batch, filters)
            for offset in range(width):  # wide convolution: column c reads words c - width + 1 .. c
                position = winners - width + 1 + offset
                real = (position >= 0) & (position < lengths)
                covered = (
                    torch.minimum(winners, lengths - 1) - torch.clamp(winners - width + 1, min=0) + 1
                ).clamp(min=1)
                credit.scatter_add_(1, position.clamp(0, length - 1), real.to(features.dtype) / covered)
        return credit / credit.sum(dim=1, keepdim=True).clamp(min=1e-12)


def match_ids(answer: Parsed, question: Parsed, idf: IdfTable, positions: Sequence[int]) -> list[list[float]]:
    """Per answer model word: [in the question, that times idf / max idf]; punctuation never matches."""
    asked = {normalize(token) for token, punct in zip(question.tokens, question.is_punct) if token.strip() and not punct}
    rows = []
    for i in positions:
        word = normalize(answer.tokens[i])
        hit = float(word in asked and not answer.is_punct[i])
        rows.append([hit, hit * idf.idf(word) / idf.max_idf if idf.max_idf > 0 else 0.0])
    return rows


def pad_rows(rows: Sequence[np.ndarray], width: int, dtype: torch.dtype) -> torch.Tensor:
    """(count, longest, width) tensor of right-padded (length_i, width) arrays (length >= 1)."""
    length = max([len(row) for row in rows] + [1])
    padded = torch.zeros(len(rows), length, width, dtype=dtype)
    for i, row in enumerate(rows):
        if len(row):
            padded[i, : len(row)] = torch.as_tensor(np.asarray(row), dtype=dtype)
    return padded


class CompareAggregateRanker(AnalysisReadingRanker):
    name = "compare_aggregate"
    title = "Compare-aggregate, listwise loss, exact-match and answer-type channels (Wang & Jiang 2017)"
    config_class = CompareAggregateConfig
    capabilities = replace(AnalysisReadingRanker.capabilities, explains=NEURAL.explains | {"matrices"})
    config: CompareAggregateConfig

    def reads_analysis(self) -> bool:
        return self.config.answer_type

    def build_model(self, vectors: torch.Tensor) -> CompareAggregate:
        return CompareAggregate(vectors, self.config)

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adamax([p for p in model.parameters() if p.requires_grad], lr=self.config.lr)

    def loss(self) -> nn.Module:
        return ListwiseKLLoss() if self.config.loss == "listwise" else PointwiseLogisticLoss()

    def relevance(self, output: torch.Tensor) -> torch.Tensor:
        """The score itself: the listwise loss only orders a pool's scores."""
        return output.double()

    def batches(self, inputs: dict[str, torch.Tensor], groups: torch.Tensor, labels: torch.Tensor) -> loop.BatchFactory:
        """Whole question pools (questions by text), ``batch_size`` questions a batch."""
        return QuestionBatches(inputs, groups, labels, self.config.batch_size)

    def extra_inputs(self, pairs: Sequence[Pair]) -> dict[str, torch.Tensor]:
        """The enabled channels' inputs, row- and position-aligned with the word ids."""
        cfg = self.config
        q_positions = [token_positions(p.question, cfg.max_question_len) for p in pairs]
        a_positions = [token_positions(p.answer, cfg.max_answer_len) for p in pairs]
        inputs: dict[str, torch.Tensor] = {}
        if cfg.exact_match:
            rows = [np.asarray(match_ids(p.answer, p.question, self.idf, pos), dtype=np.float32).reshape(-1, 2)
                    for p, pos in zip(pairs, a_positions)]  # fmt: skip
            inputs["answer_match"] = pad_rows(rows, MATCH_FEATURES, torch.float32)
        if cfg.answer_type:
            inputs["answer_type"] = pad_ids(
                [answer_semantic_ids(p.answer, a, pos) for p, a, pos in zip(pairs, self.analyses(pairs), a_positions)]
            )
        if cfg.contextual:
            for side, positions in (("question", q_positions), ("answer", a_positions)):
                texts = [getattr(p, side).text for p in pairs]
                vectors = dict(zip(dict.fromkeys(texts), token_vectors(list(dict.fromkeys(texts)))))
                rows = [vectors[text][pos] for text, pos in zip(texts, positions)]
                inputs[f"{side}_context"] = pad_rows(rows, CONTEXT_DIM, torch.float16)
        return inputs

    # ------------------------------------------------------------------ explanation

    def explain_pair(self, pair: Pair) -> Explanation:
        """Answer weights: each answer word's share of the aggregation's max-pooled features;
        question weights: those shares carried back through the attention. Matrices (question
        token x answer token): ``attention`` (G; each read answer word's column sums to 1) and
        ``comparison`` (G times the answer word's share: which word pairs the score rests on; sums
        to 1). Links: shared lemmas and, with the answer-type channel, REL-FOCUS links."""
        model = self.model()
        model.eval()
        inputs = {name: tensor.to(self._device) for name, tensor in self.encode([pair]).items()}
        with torch.inference_mode():
            q_ids, a_ids = trim_padding(inputs["question"]), trim_padding(inputs["answer"])
            attention, compared = model.compare_words(
                q_ids, a_ids, read_mask(q_ids), inputs.get("question_context"), inputs.get("answer_context")
            )
            features = model.channels(compared, inputs.get("answer_match"), inputs.get("answer_type"))
            credit = model.pooling_credit(features, a_ids != PAD_ID)[0]
            score = float(self.relevance(model(**inputs))[0])
        cfg = self.config
        q_parsed, a_parsed = pair.question, pair.answer
        q_pos, a_pos = token_positions(q_parsed, cfg.max_question_len), token_positions(a_parsed, cfg.max_answer_len)
        weights = attention[0, : len(a_pos), : len(q_pos)].T.cpu().numpy()  # (question, answer)
        shares = credit[: len(a_pos)].cpu().numpy()
        analysis = self.analyses([pair])[0]
        return Explanation(
            score=score,
            question_tokens=list(q_parsed.tokens),
            answer_tokens=list(a_parsed.tokens),
            answer_weights=spread(shares.tolist(), a_pos, len(a_parsed.tokens)),
            question_weights=spread((weights @ shares).tolist(), q_pos, len(q_parsed.tokens)),
            weight_kind="attention",
            matrices={
                "attention": _token_grid(weights, q_pos, a_pos, q_parsed, a_parsed),
                "comparison": _token_grid(weights * shares, q_pos, a_pos, q_parsed, a_parsed),
            },
            links=rel_tag(q_parsed, a_parsed, analysis.focus, analysis.qclass).links,
        )


def _token_grid(
    values: np.ndarray, q_pos: Sequence[int], a_pos: Sequence[int], question: Parsed, answer: Parsed
) -> list[list[float]]:
    """A (read question words, read answer words) matrix on all tokens; unread tokens get 0."""
    grid = np.zeros((len(question.tokens), len(answer.tokens)))
    grid[np.ix_(np.asarray(q_pos, dtype=np.int64), np.asarray(a_pos, dtype=np.int64))] = values
    return grid.tolist()

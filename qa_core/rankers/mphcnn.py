"""MP-HCNN (Rao, Yang, Zhang, Ture & Lin, AAAI 2019): multi-perspective relevance matching with
hierarchical convolutions. See ``shared/papers/mp-hcnn.md``.

Perspectives: question vs. candidate words; question vs. candidate character trigrams ("hello" ->
#he hel ell llo lo#); question vs. URL character trigrams when the candidates have URLs
(``Pair.url``; the URL cut to 120 characters, "<URL>" when a candidate has none). Each of the two
components (words; character trigrams, which the URL shares) embeds its terms and stacks
``layers`` = 4 same-length convolutions (width 2 for words, 4 for trigrams) whose weights the query
and the document share. At every level h = 0..4 (embeddings included) the parameter-free similarity
S = M_q M_d^T is normalised by a softmax over the document axis (padding masked), pooled per query
position by max and by mean over the document, and multiplied by the query term's IDF; all levels
and perspectives are concatenated (a fixed-width vector: question positions are padded to the
caps, as the paper pads to the longest query) and an MLP with one ReLU layer gives the softmax
over {irrelevant, relevant}, trained with pointwise NLL and SGD (lr 0.05).

Choices the paper leaves open or that differ, all named:

- The paper's tweets are not available: the model is evaluated on WikiQA and TrecQA, where
  candidates have no URL, so the URL perspective is off there (``url_perspective=None`` decides at
  fit time: on when any training candidate has a URL).
- Word vectors: GloVe 6B 50d, trainable (the paper's word2vec, trainable); unknown words get the
  shared U[-0.25, 0.25] initialisation, trigrams U[0, 0.1] as in the paper.
- Filters F = 64 (the paper tunes {64, 128, 256}; the smallest keeps CPU training affordable),
  dropout 0.3 before the MLP, MLP hidden size 128 (not given), tanh after each convolution (not
  given; it keeps the dot products, and so the softmax, in a sane range).
- Mean pooling of a softmax-normalised row over the document's m positions is 1/m whatever the
  scores (the paper's formula): it carries the document length, which is why removing it cost
  the paper little. Implemented as written.
- Optimiser: Adam (lr 1e-3, 5 epochs) instead of the paper's SGD (lr 0.05): on TrecQA DEV (seed 1)
  Adam reached MAP 0.672 in 5 epochs, SGD 0.654 in 8 (``optimizer="sgd", lr=0.05`` restores it).
- The first-stage interpolation ("MP-HCNN+") is not part of the ranker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from qa_core.classifiers.analysis import QuestionAnalyzer
from qa_core.nn.encoders import PAD_ID, WordEmbedding
from qa_core.rankers.base import Explanation
from qa_core.rankers.neural import NEURAL, NeuralConfig, NeuralRanker, Pair, model_words, token_positions
from qa_core.text.features import IdfTable
from qa_core.text.nlp import Parsed, parse_many
from qa_core.text.trigrams import text_trigrams, url_words
from qa_core.text.vectors import Vocabulary
from qa_core.training.batching import pad_ids, trim_padding
from qa_core.types import Question

TRIGRAM_INIT = (0.0, 0.1)  # the paper's range for OOV words and trigrams


@dataclass(frozen=True)
class MPHCNNConfig(NeuralConfig):
    filters: int = 64
    layers: int = 4
    word_width: int = 2
    char_width: int = 4
    hidden: int = 128
    dropout: float = 0.3
    optimizer: str = "adam"  # "adam", or "sgd" with lr 0.05 as in the paper (see the module docstring)
    lr: float = 1e-3
    batch_size: int = 64
    max_epochs: int = 5  # not given; CPU budget (dev MAP picks the best check anyway)
    patience: int = 3
    eval_every: int = 50
    trainable_embeddings: bool = True
    max_question_len: int = 40
    max_answer_len: int = 60
    max_question_chars: int = 150  # trigrams
    max_answer_chars: int = 250  # about the 90th percentile of WikiQA/TrecQA answers; caps CPU cost
    url_chars: int = 120
    url_perspective: bool | None = None  # None: on when any training candidate has a URL


class HierarchicalEncoder(nn.Module):
    """Embedded terms -> ``layers`` stacked same-length convolutions; every level's output.

    "Same" length for an even width pads ``(width - 1) // 2`` columns before and ``width // 2``
    after. Padding columns are zeroed after every layer, so a real term sees exactly what it would
    at the text's edge and the output does not depend on how much padding a batch adds.
    """

    def __init__(self, dim: int, filters: int, width: int, layers: int):
        super().__init__()
        self.same = ((width - 1) // 2, width // 2)
        sizes = [dim] + [filters] * (layers - 1)
        self.convs = nn.ModuleList(nn.Conv1d(size, filters, kernel_size=width) for size in sizes)

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        """(batch, length, dim), (batch, length) bool -> ``layers + 1`` tensors (batch, length, channels)."""
        keep = mask.unsqueeze(1).to(embedded.dtype)
        columns = embedded.transpose(1, 2) * keep
        levels = [columns]
        for conv in self.convs:
            columns = torch.tanh(conv(F.pad(columns, self.same))) * keep
            levels.append(columns)
        return [level.transpose(1, 2) for level in levels]


def match_matrix(query: torch.Tensor, doc: torch.Tensor, doc_mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the document axis of S = M_q M_d^T, padding masked: (batch, n, m), rows sum to 1
    over real document terms (0 everywhere for a document without any)."""
    scores = (query @ doc.transpose(1, 2)).masked_fill(~doc_mask.unsqueeze(1), float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)


def pooled_evidence(
    query_levels: Sequence[torch.Tensor],
    doc_levels: Sequence[torch.Tensor],
    doc_mask: torch.Tensor,
    weights: torch.Tensor,
    width: int,
) -> torch.Tensor:
    """Per level: IDF x max and IDF x mean of each query row of the match matrix, the query axis
    zero-padded to ``width``; concatenated into (batch, levels * 2 * width).

    ``weights`` (batch, n) are 0 on query padding, so padded query rows contribute nothing.
    """
    real = doc_mask.sum(dim=1, keepdim=True).clamp(min=1).to(weights.dtype)
    features = []
    for query, doc in zip(query_levels, doc_levels):
        matches = match_matrix(query, doc, doc_mask)
        for pooled in (matches.max(dim=-1).values, matches.sum(dim=-1) / real):
            features.append(F.pad(pooled * weights, (0, width - pooled.shape[1])))
    return torch.cat(features, dim=-1)


class MPHCNN(nn.Module):
    """Word and trigram components, the similarity layer at every level, and the MLP."""

    def __init__(self, vectors: torch.Tensor, trigrams: int, config: MPHCNNConfig, url_perspective: bool):
        super().__init__()
        cfg = config
        self.config = cfg
        self.url_perspective = url_perspective
        self.embedding = WordEmbedding(vectors, trainable=cfg.trainable_embeddings)
        self.trigram_embedding = nn.Embedding(trigrams, self.embedding.dim, padding_idx=PAD_ID)
        nn.init.uniform_(self.trigram_embedding.weight, *TRIGRAM_INIT)
        with torch.no_grad():
            self.trigram_embedding.weight[PAD_ID].zero_()
        self.words = HierarchicalEncoder(self.embedding.dim, cfg.filters, cfg.word_width, cfg.layers)
        self.chars = HierarchicalEncoder(self.embedding.dim, cfg.filters, cfg.char_width, cfg.layers)
        levels = 2 * (cfg.layers + 1)
        features = levels * (cfg.max_question_len + cfg.max_question_chars * (2 if url_perspective else 1))
        self.dropout = nn.Dropout(cfg.dropout)
        self.hidden = nn.Linear(features, cfg.hidden)
        self.output = nn.Linear(cfg.hidden, 2)

    def word_levels(self, ids: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        mask = ids != PAD_ID
        return self.words(self.embedding(ids), mask), mask

    def char_levels(self, ids: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        mask = ids != PAD_ID
        return self.chars(self.trigram_embedding(ids), mask), mask

    def evidence(
        self,
        question: torch.Tensor,
        answer: torch.Tensor,
        question_idf: torch.Tensor,
        question_chars: torch.Tensor,
        question_char_idf: torch.Tensor,
        answer_chars: torch.Tensor,
        url_chars: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The similarity layer's output Φ (batch, features): no parameters past the encoders."""
        cfg = self.config
        question, answer = trim_padding(question), trim_padding(answer)
        question_chars, answer_chars = trim_padding(question_chars), trim_padding(answer_chars)
        q_words, _ = self.word_levels(question)
        a_words, a_mask = self.word_levels(answer)
        q_chars, _ = self.char_levels(question_chars)
        a_chars, a_char_mask = self.char_levels(answer_chars)
        word_idf = question_idf[:, : question.shape[1]]
        char_idf = question_char_idf[:, : question_chars.shape[1]]
        parts = [
            pooled_evidence(q_words, a_words, a_mask, word_idf, cfg.max_question_len),
            pooled_evidence(q_chars, a_chars, a_char_mask, char_idf, cfg.max_question_chars),
        ]
        if self.url_perspective:
            u_chars, u_mask = self.char_levels(trim_padding(url_chars))
            parts.append(pooled_evidence(q_chars, u_chars, u_mask, char_idf, cfg.max_question_chars))
        return torch.cat(parts, dim=-1)

    def forward(self, **inputs: torch.Tensor) -> torch.Tensor:
        return self.output(torch.relu(self.hidden(self.dropout(self.evidence(**inputs)))))


class MPHCNNRanker(NeuralRanker):
    name = "mphcnn"
    title = "MP-HCNN: multi-perspective hierarchical CNN (Rao et al. 2019)"
    config_class = MPHCNNConfig
    capabilities = replace(NEURAL, explains=frozenset({"answer_weights", "question_weights", "matrices"}), reads=frozenset({"url"}))
    config: MPHCNNConfig

    def __init__(self, config: MPHCNNConfig | None = None):
        super().__init__(config)
        self.trigrams: Vocabulary | None = None
        self.trigram_idf: IdfTable | None = None
        self.url_perspective = bool(self.config.url_perspective)

    # ------------------------------------------------------------------ hooks

    def prepare(
        self, train: Sequence[Question], dev: Sequence[Question], seed: int, analyzer: QuestionAnalyzer | None
    ) -> None:
        """Trigram vocabulary (train + dev texts and URLs, no labels), trigram IDF (train candidates)."""
        candidates = [c for q in train for c in q.candidates]
        setting = self.config.url_perspective
        self.url_perspective = any(c.url for c in candidates) if setting is None else setting
        texts = list(dict.fromkeys(t for q in [*train, *dev] for t in (q.text, *(c.text for c in q.candidates))))
        parsed = dict(zip(texts, parse_many(texts)))
        sequences = [text_trigrams(model_words(p))[0] for p in parsed.values()]
        if self.url_perspective:
            sequences += [text_trigrams(url_words(c.url))[0] for q in [*train, *dev] for c in q.candidates]
        self.trigrams = Vocabulary.build(sequences)
        self.trigram_idf = IdfTable.fit(text_trigrams(model_words(parsed[c.text]))[0] for c in candidates)

    def extra_state(self) -> dict[str, Any]:
        return {
            "trigrams": self.trigrams.to_list(),
            "trigram_idf": self.trigram_idf.to_dict(),
            "url_perspective": self.url_perspective,
        }

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.trigrams = Vocabulary.from_list(state["trigrams"])
        self.trigram_idf = IdfTable.from_dict(state["trigram_idf"])
        self.url_perspective = bool(state["url_perspective"])

    def build_model(self, vectors: torch.Tensor) -> MPHCNN:
        return MPHCNN(vectors, len(self.trigrams), self.config, self.url_perspective)

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        parameters = [p for p in model.parameters() if p.requires_grad]
        if self.config.optimizer == "adam":
            return torch.optim.Adam(parameters, lr=self.config.lr)
        return torch.optim.SGD(parameters, lr=self.config.lr)

    def _trigram_rows(self, words: Sequence[Sequence[str]], cap: int) -> torch.Tensor:
        return pad_ids([self.trigrams.encode(text_trigrams(row, cap)[0]) for row in words])

    def extra_inputs(self, pairs: Sequence[Pair]) -> dict[str, torch.Tensor]:
        """Question word IDF, question/answer (and URL) trigram ids, question trigram IDF."""
        cfg = self.config
        q_words = [model_words(p.question, cfg.max_question_len) for p in pairs]
        q_trigrams = [text_trigrams(model_words(p.question), cfg.max_question_chars)[0] for p in pairs]
        a_words = [model_words(p.answer) for p in pairs]
        inputs = {
            "question_idf": _padded_floats([[self.idf.idf(w) for w in row] for row in q_words]),
            "question_chars": pad_ids([self.trigrams.encode(row) for row in q_trigrams]),
            "question_char_idf": _padded_floats([[self.trigram_idf.idf(t) for t in row] for row in q_trigrams]),
            "answer_chars": self._trigram_rows(a_words, cfg.max_answer_chars),
        }
        if self.url_perspective:
            inputs["url_chars"] = self._trigram_rows([url_words(p.url, cfg.url_chars) for p in pairs], None)
        return inputs

    # ------------------------------------------------------------------ explanation

    def explain_pair(self, pair: Pair) -> Explanation:
        """Match matrices (softmax over the answer) at every level of both components, as
        question-token x answer-token matrices named "words level h" / "characters level h"; a
        trigram matrix is reduced to tokens by the max over each token pair's trigrams. Answer
        weights: the IDF-weighted match mass every answer word receives, summed over word levels;
        question weights: each word's IDF-weighted best match, summed likewise."""
        model = self.model()
        model.eval()
        cfg = self.config
        inputs = {name: tensor.to(self._device) for name, tensor in self.encode([pair]).items()}
        q_parsed, a_parsed = pair.question, pair.answer
        q_pos = token_positions(q_parsed, cfg.max_question_len)
        a_pos = token_positions(a_parsed, cfg.max_answer_len)
        q_all, a_all = token_positions(q_parsed), token_positions(a_parsed)
        _, q_owner = text_trigrams(model_words(q_parsed), cfg.max_question_chars)
        _, a_owner = text_trigrams(model_words(a_parsed), cfg.max_answer_chars)
        matrices: dict[str, list[list[float]]] = {}
        with torch.inference_mode():
            q_levels, _ = model.word_levels(inputs["question"])
            a_levels, a_mask = model.word_levels(inputs["answer"])
            qc_levels, _ = model.char_levels(inputs["question_chars"])
            ac_levels, ac_mask = model.char_levels(inputs["answer_chars"])
            idf = inputs["question_idf"][0]
            answer_mass = torch.zeros(len(a_pos), dtype=torch.float64)
            question_best = torch.zeros(len(q_pos), dtype=torch.float64)
            for level, (q, a) in enumerate(zip(q_levels, a_levels)):
                matches = match_matrix(q, a, a_mask)[0].double()
                weighted = matches * idf.double().unsqueeze(1)
                answer_mass += weighted.sum(dim=0).cpu()
                question_best += weighted.max(dim=1).values.cpu()
                matrices[f"words level {level}"] = _token_matrix(matches.cpu().numpy(), q_pos, a_pos, q_parsed, a_parsed)
            for level, (q, a) in enumerate(zip(qc_levels, ac_levels)):
                matches = match_matrix(q, a, ac_mask)[0].cpu().numpy()
                matrices[f"characters level {level}"] = _token_matrix(
                    matches, [q_all[o] for o in q_owner], [a_all[o] for o in a_owner], q_parsed, a_parsed
                )
            score = float(self.relevance(model(**inputs))[0])
        answer_weights = [0.0] * len(a_parsed.tokens)
        for value, position in zip(answer_mass.tolist(), a_pos):
            answer_weights[position] = value
        question_weights = [0.0] * len(q_parsed.tokens)
        for value, position in zip(question_best.tolist(), q_pos):
            question_weights[position] = value
        return Explanation(
            score=score,
            question_tokens=list(q_parsed.tokens),
            answer_tokens=list(a_parsed.tokens),
            answer_weights=answer_weights,
            question_weights=question_weights,
            weight_kind="match",
            matrices=matrices,
        )


def _padded_floats(rows: Sequence[Sequence[float]]) -> torch.Tensor:
    """Right-padded (count, longest) float32 tensor, 0 on padding (as ``pad_ids`` for ids)."""
    length = max([len(row) for row in rows] + [1])
    padded = torch.zeros((len(rows), length), dtype=torch.float32)
    for i, row in enumerate(rows):
        padded[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return padded


def _token_matrix(
    matches: np.ndarray, q_tokens: Sequence[int], a_tokens: Sequence[int], question: Parsed, answer: Parsed
) -> list[list[float]]:
    """A (rows, columns) term match matrix as question-token x answer-token: the max over the
    terms of each token pair (a word is one term; a word has one trigram per character)."""
    grid = np.zeros((len(question.tokens), len(answer.tokens)))
    rows = np.asarray(q_tokens, dtype=np.int64)
    columns = np.asarray(a_tokens, dtype=np.int64)
    for i, row in enumerate(rows):
        np.maximum.at(grid[row], columns, matches[i, : len(columns)])
    return grid.tolist()

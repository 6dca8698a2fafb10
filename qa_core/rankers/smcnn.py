"""SM-CNN (Severyn & Moschitti, SIGIR 2015): two convolutional sentence models, a learned
similarity, overlap features and a softmax over {irrelevant, relevant}; candidates are ranked by
P(relevant). See ``shared/papers/sm-cnn.md``; every choice below follows it unless noted.

Deliberate, documented choices:

- Embeddings are GloVe 6B 50d (the paper's word2vec 50d is not available) and FROZEN; being
  frozen, the table is open-vocabulary (``qa_core.rankers.neural``).
- Texts are capped at ``max_question_len`` / ``max_answer_len`` model tokens (60 / 100, beyond
  every TrecQA/WikiQA question and nearly every answer); the rest cannot change the score.
- Whitespace tokens are skipped; everything else spaCy yields (punctuation included) is a word,
  normalised as in the paper (lowercase, digits -> 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from qa_core.nn.attribution import EmbeddedInputs, gradient_norm
from qa_core.nn.encoders import PAD_ID, ConvEncoder, WordEmbedding
from qa_core.rankers.base import Explanation
from qa_core.rankers.neural import NEURAL, NeuralConfig, NeuralRanker, Pair, spread, token_positions
from qa_core.text.features import N_OVERLAP_FEATURES, overlap_features
from qa_core.text.links import lexical_links
from qa_core.text.nlp import Parsed
from qa_core.text.vectors import normalize
from qa_core.training import loop
from qa_core.training.batching import trim_padding


@dataclass(frozen=True)
class SMCNNConfig(NeuralConfig):
    """The paper's hyper-parameters (Adadelta's rho is torch's default, 0.9); training settings inherited."""

    filters: int = 100
    width: int = 5
    dropout: float = 0.5
    l2_conv: float = 1e-5
    l2_other: float = 1e-4


class SMCNN(nn.Module):
    """The network: separate question and answer encoders over one embedding table (frozen, as
    in the paper, unless ``config.trainable_embeddings``)."""

    def __init__(self, vectors: torch.Tensor, config: SMCNNConfig):
        super().__init__()
        filters, width = config.filters, config.width
        self.embedding = WordEmbedding(vectors, trainable=config.trainable_embeddings)
        self.question_encoder = ConvEncoder(self.embedding.dim, filters, width)
        self.answer_encoder = ConvEncoder(self.embedding.dim, filters, width)
        self.similarity = nn.Parameter(torch.empty(filters, filters))  # M in x_q^T M x_a
        nn.init.xavier_uniform_(self.similarity)
        join = 2 * filters + 1 + N_OVERLAP_FEATURES
        self.hidden = nn.Linear(join, join)
        self.dropout = nn.Dropout(config.dropout)
        self.output = nn.Linear(join, 2)

    def forward(self, question: torch.Tensor, answer: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """Padded id tensors and (batch, 4) overlap features -> (batch, 2) logits."""
        question, answer = trim_padding(question), trim_padding(answer)
        return self.classify(
            self.embedding(question), question != PAD_ID, self.embedding(answer), answer != PAD_ID, features
        )

    def classify(
        self,
        question: torch.Tensor,
        question_mask: torch.Tensor,
        answer: torch.Tensor,
        answer_mask: torch.Tensor,
        features: torch.Tensor,
    ) -> torch.Tensor:
        """Logits from embedded words, the entry point for gradient saliency."""
        x_q = self.question_encoder(question, question_mask)
        x_a = self.answer_encoder(answer, answer_mask)
        x_sim = ((x_q @ self.similarity) * x_a).sum(dim=-1, keepdim=True)
        joined = torch.cat([x_q, x_sim, x_a, features], dim=-1)
        return self.output(self.dropout(torch.tanh(self.hidden(joined))))


class SMCNNRanker(NeuralRanker):
    name = "smcnn"
    title = "SM-CNN (Severyn & Moschitti 2015)"
    config_class = SMCNNConfig
    capabilities = replace(NEURAL, explains=NEURAL.explains | {"matrices"})

    def build_model(self, vectors: torch.Tensor) -> SMCNN:
        return SMCNN(vectors, self.config)

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        cfg = self.config
        groups = loop.weight_decay_groups(model, default=cfg.l2_other, by_module_type={nn.Conv1d: cfg.l2_conv})
        return torch.optim.Adadelta(groups, lr=1.0, eps=1e-6)

    def extra_inputs(self, pairs: Sequence[Pair]) -> dict[str, torch.Tensor]:
        """The four word-overlap features of every pair (IDF from the training candidates)."""
        features = [overlap_features(p.question, p.answer, self.idf) for p in pairs]
        stacked = np.stack(features) if features else np.zeros((0, N_OVERLAP_FEATURES), dtype=np.float32)
        return {"features": torch.as_tensor(stacked, dtype=torch.float32)}

    def explain_pair(self, pair: Pair) -> Explanation:
        """Gradient saliency of P(relevant) per word, embedding cosine matrix, lexical links."""
        model = self.model()
        model.eval()
        inputs = {name: tensor.to(self._device) for name, tensor in self.encode([pair]).items()}
        q_ids, a_ids = inputs["question"], inputs["answer"]
        embedded = EmbeddedInputs(
            (model.embedding(q_ids), model.embedding(a_ids)),
            lambda q, a: self.relevance(
                model.classify(q, q_ids != PAD_ID, a, a_ids != PAD_ID, inputs["features"].expand(len(q), -1))
            ),
        )
        (q_saliency, a_saliency), score = gradient_norm(embedded)
        q_parsed, a_parsed = pair.question, pair.answer
        cfg = self.config
        return Explanation(
            score=score,
            question_tokens=list(q_parsed.tokens),
            answer_tokens=list(a_parsed.tokens),
            answer_weights=spread(a_saliency, token_positions(a_parsed, cfg.max_answer_len), len(a_parsed.tokens)),
            question_weights=spread(q_saliency, token_positions(q_parsed, cfg.max_question_len), len(q_parsed.tokens)),
            weight_kind="saliency",
            matrices={"similarity": self._cosine_matrix(q_parsed, a_parsed)},
            links=lexical_links(q_parsed, a_parsed),
        )

    def _cosine_matrix(self, question: Parsed, answer: Parsed) -> list[list[float]]:
        """Cosine of the (frozen) word vectors of every question x answer token."""
        table = self.model().embedding.weight

        def unit_vectors(parsed: Parsed) -> torch.Tensor:
            ids = self.vocabulary.encode([normalize(token) for token in parsed.tokens])
            vectors = table[torch.as_tensor(ids, dtype=torch.long, device=table.device)]
            return torch.nn.functional.normalize(vectors, dim=-1)

        return (unit_vectors(question) @ unit_vectors(answer).T).cpu().tolist()

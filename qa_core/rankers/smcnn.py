"""SM-CNN (Severyn & Moschitti, SIGIR 2015): two convolutional sentence models, a learned
similarity, overlap features and a softmax over {irrelevant, relevant}; candidates are ranked by
P(relevant). See ``shared/papers/sm-cnn.md``; every choice below follows it unless noted.

Deliberate, documented choices:

- Embeddings are GloVe 6B 50d (the paper's word2vec 50d is not available) and FROZEN, so the
  vocabulary may include every train and dev text seen at fit time without leaking labels; words
  first seen at scoring time map to UNK.
- Texts are capped at ``max_question_len`` / ``max_answer_len`` model tokens (60 / 100, beyond
  every TrecQA/WikiQA question and nearly every answer); the rest cannot change the score.
- Whitespace tokens are skipped; everything else spaCy yields (punctuation included) is a word,
  normalised as in the paper (lowercase, digits -> 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from qa_core.device import default_device
from qa_core.evaluation import evaluate, qrels_from_questions, run_from_scores
from qa_core.nn.encoders import PAD_ID, ConvEncoder, WordEmbedding
from qa_core.rankers.base import Explanation, NotTrainedError, ProgressCallback, Ranker
from qa_core.rankers.registry import register
from qa_core.text.features import N_OVERLAP_FEATURES, IdfTable, overlap_features
from qa_core.text.links import lexical_links
from qa_core.text.nlp import Parsed, parse_many
from qa_core.text.vectors import Vocabulary, embedding_matrix, normalize
from qa_core.training.batching import TensorBatches, pad_ids, trim_padding
from qa_core.training import loop
from qa_core.types import InputError, Question


@dataclass(frozen=True)
class SMCNNConfig:
    """Hyper-parameters; the defaults are the paper's (Adadelta's rho is torch's default, 0.9)."""

    filters: int = 100
    width: int = 5
    dropout: float = 0.5
    batch_size: int = 50
    max_epochs: int = 25
    eval_every: int = 10
    patience: int = 5
    l2_conv: float = 1e-5
    l2_other: float = 1e-4
    max_question_len: int = 60
    max_answer_len: int = 100
    score_batch_size: int = 500


class SMCNN(nn.Module):
    """The network: separate question and answer encoders over one frozen embedding table."""

    def __init__(self, vectors: torch.Tensor, filters: int, width: int, dropout: float):
        super().__init__()
        self.embedding = WordEmbedding(vectors)
        self.question_encoder = ConvEncoder(self.embedding.dim, filters, width)
        self.answer_encoder = ConvEncoder(self.embedding.dim, filters, width)
        self.similarity = nn.Parameter(torch.empty(filters, filters))  # M in x_q^T M x_a
        nn.init.xavier_uniform_(self.similarity)
        join = 2 * filters + 1 + N_OVERLAP_FEATURES
        self.hidden = nn.Linear(join, join)
        self.dropout = nn.Dropout(dropout)
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


def expected_parameter_count(filters: int, width: int, dim: int) -> int:
    """Trainable parameters (frozen embeddings excluded), for the tests and the model card."""
    conv = filters * dim * width + filters
    join = 2 * filters + 1 + N_OVERLAP_FEATURES
    return 2 * conv + filters * filters + (join * join + join) + (join * 2 + 2)


@register
class SMCNNRanker(Ranker):
    name = "smcnn"
    trainable = True

    def __init__(self, **config: Any):
        self.config = SMCNNConfig(**config)
        self._device = default_device()
        self._model: SMCNN | None = None
        self._vocabulary: Vocabulary | None = None
        self._idf: IdfTable | None = None

    @property
    def device(self) -> str:
        return str(self._device)

    # ------------------------------------------------------------------ text -> tensors

    def _encode_text(self, parsed: Parsed, cap: int) -> list[int]:
        return self._vocabulary.encode(_model_words(parsed, cap))

    def _encode_pairs(self, pairs: Sequence[tuple[str, str]]) -> dict[str, torch.Tensor]:
        """Model inputs for (question, answer) pairs, on the model's device."""
        texts = list(dict.fromkeys(text for pair in pairs for text in pair))
        parsed = dict(zip(texts, parse_many(texts)))
        cfg = self.config
        question = pad_ids([self._encode_text(parsed[q], cfg.max_question_len) for q, _ in pairs])
        answer = pad_ids([self._encode_text(parsed[a], cfg.max_answer_len) for _, a in pairs])
        features = np.stack([overlap_features(parsed[q], parsed[a], self._idf) for q, a in pairs])
        inputs = {"question": question, "answer": answer, "features": torch.as_tensor(features, dtype=torch.float32)}
        return {name: tensor.to(self._device) for name, tensor in inputs.items()}

    # ------------------------------------------------------------------ scoring

    def _require_model(self) -> SMCNN:
        if self._model is None:
            raise NotTrainedError(
                "SM-CNN is not trained yet: train it on a dataset (fit) or load a checkpoint before scoring"
            )
        return self._model

    def _predict(self, inputs: dict[str, torch.Tensor]) -> np.ndarray:
        """P(relevant) per row, in batches, without autograd (never the argmax class)."""
        model = self._require_model()
        model.eval()
        count, step = len(inputs["features"]), self.config.score_batch_size
        chunks = []
        with torch.inference_mode():
            for start in range(0, count, step):
                batch = {name: tensor[start : start + step] for name, tensor in inputs.items()}
                # float64 softmax: near-certain candidates must not tie at 1.0 (the ranking needs them apart).
                chunks.append(torch.softmax(model(**batch).double(), dim=-1)[:, 1].cpu())
        return torch.cat(chunks).numpy() if chunks else np.zeros(0)

    def score(self, question: str, candidates: Sequence[str]) -> np.ndarray:
        return self.score_pools([(question, candidates)])[0]

    def score_pools(self, pools: Sequence[tuple[str, Sequence[str]]]) -> list[np.ndarray]:
        """All pools' pairs in shared batches, split back per pool."""
        self._require_model()
        pairs = [(question, candidate) for question, candidates in pools for candidate in candidates]
        scores = self._predict(self._encode_pairs(pairs)) if pairs else np.zeros(0)
        bounds = np.cumsum([len(candidates) for _, candidates in pools])[:-1]
        return np.split(scores, bounds)

    def explain(self, question: str, candidate: str) -> Explanation:
        """Gradient saliency of P(relevant) per word, embedding cosine matrix, lexical links."""
        model = self._require_model()
        model.eval()
        q_parsed, a_parsed = parse_many([question, candidate])
        q_positions = _positions(q_parsed, self.config.max_question_len)
        a_positions = _positions(a_parsed, self.config.max_answer_len)
        inputs = self._encode_pairs([(question, candidate)])
        q_ids, a_ids = inputs["question"], inputs["answer"]
        # The table is frozen, so the embedded words themselves are made the leaves to differentiate.
        q_embedded = model.embedding(q_ids).detach().requires_grad_(True)
        a_embedded = model.embedding(a_ids).detach().requires_grad_(True)
        with torch.enable_grad():
            logits = model.classify(q_embedded, q_ids != PAD_ID, a_embedded, a_ids != PAD_ID, inputs["features"])
            relevant = torch.softmax(logits.double(), dim=-1)[0, 1]
            q_grad, a_grad = torch.autograd.grad(relevant, [q_embedded, a_embedded])
        return Explanation(
            score=float(relevant.detach()),
            question_tokens=list(q_parsed.tokens),
            answer_tokens=list(a_parsed.tokens),
            answer_weights=_per_token(a_grad[0].norm(dim=-1), a_positions, len(a_parsed.tokens)),
            question_weights=_per_token(q_grad[0].norm(dim=-1), q_positions, len(q_parsed.tokens)),
            weight_kind="saliency",
            matrices={"similarity": self._cosine_matrix(q_parsed, a_parsed)},
            links=lexical_links(q_parsed, a_parsed),
        )

    def _cosine_matrix(self, question: Parsed, answer: Parsed) -> list[list[float]]:
        """Cosine of the (frozen) word vectors of every question x answer token."""
        table = self._require_model().embedding.weight

        def unit_vectors(parsed: Parsed) -> torch.Tensor:
            ids = self._vocabulary.encode([normalize(token) for token in parsed.tokens])
            vectors = table[torch.as_tensor(ids, dtype=torch.long, device=table.device)]
            return torch.nn.functional.normalize(vectors, dim=-1)

        return (unit_vectors(question) @ unit_vectors(answer).T).cpu().tolist()

    # ------------------------------------------------------------------ training

    def fit(
        self,
        train: Sequence[Question],
        dev: Sequence[Question],
        *,
        seed: int = 1,
        progress: bool = True,
        callback: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        train_pairs = [(q.text, c.text, int(c.label > 0)) for q in train for c in q.candidates if c.label is not None]
        dev_questions = [q for q in dev if any(c.label is not None for c in q.candidates)]
        if not train_pairs:
            raise InputError("SM-CNN needs labelled candidates in the training split")
        if not dev_questions:
            raise InputError("SM-CNN needs labelled candidates in the dev split to select a model")

        cfg = self.config
        texts = list(dict.fromkeys(t for q in [*train, *dev] for t in (q.text, *(c.text for c in q.candidates))))
        parsed = dict(zip(texts, parse_many(texts)))
        self._vocabulary = Vocabulary.build([_model_words(p) for p in parsed.values()])
        self._idf = IdfTable.fit(_model_words(parsed[c.text]) for q in train for c in q.candidates)
        loop.seed_everything(seed)
        vectors = torch.as_tensor(embedding_matrix(self._vocabulary, seed))
        model = SMCNN(vectors, cfg.filters, cfg.width, cfg.dropout).to(self._device)
        self._model = model

        train_inputs = self._encode_pairs([(q, a) for q, a, _ in train_pairs])
        targets = torch.tensor([label for _, _, label in train_pairs], device=self._device)
        dev_pools = [(q.text, [c.text for c in q.candidates]) for q in dev_questions]
        dev_inputs = self._encode_pairs([(q, c) for q, cands in dev_pools for c in cands])
        dev_bounds = np.cumsum([len(cands) for _, cands in dev_pools])[:-1]
        dev_qrels = qrels_from_questions(dev_questions)

        def dev_map() -> float:
            run = run_from_scores(dev_questions, np.split(self._predict(dev_inputs), dev_bounds))
            return evaluate(run, dev_qrels).aggregate["map"]

        groups = loop.weight_decay_groups(model, default=cfg.l2_other, by_module_type={nn.Conv1d: cfg.l2_conv})
        optimizer = torch.optim.Adadelta(groups, lr=1.0, eps=1e-6)
        report = loop.train(
            model,
            optimizer,
            nn.CrossEntropyLoss(),
            TensorBatches(train_inputs, targets, cfg.batch_size),
            dev_map,
            eval_every=cfg.eval_every,
            max_epochs=cfg.max_epochs,
            patience=cfg.patience,
            seed=seed,
            progress=progress,
            callback=callback,
        )
        report["train_pairs"] = len(train_pairs)
        report["vocabulary"] = len(self._vocabulary)
        return report

    # ------------------------------------------------------------------ persistence

    def state(self) -> dict[str, Any]:
        model = self._require_model()
        return {
            "config": asdict(self.config),
            "vocabulary": self._vocabulary.to_list(),
            "embeddings": model.embedding.weight.detach().cpu(),
            "idf": self._idf.to_dict(),
            "model": {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()},
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SMCNNRanker:
        ranker = cls(**state["config"])
        cfg = ranker.config
        ranker._vocabulary = Vocabulary.from_list(state["vocabulary"])
        ranker._idf = IdfTable.from_dict(state["idf"])
        model = SMCNN(state["embeddings"], cfg.filters, cfg.width, cfg.dropout)
        model.load_state_dict(state["model"])
        ranker._model = model.to(ranker._device).eval()
        return ranker


def _per_token(values: torch.Tensor, positions: Sequence[int], length: int) -> list[float]:
    """Spread per-model-word values over all tokens; tokens the model did not read get 0."""
    weights = [0.0] * length
    for value, position in zip(values.tolist(), positions):
        weights[position] = value
    return weights


def _positions(parsed: Parsed, cap: int | None = None) -> list[int]:
    """Indices of the tokens the model reads: non-whitespace, the first ``cap`` of them."""
    return [i for i, token in enumerate(parsed.tokens) if token.strip()][:cap]


def _model_words(parsed: Parsed, cap: int | None = None) -> list[str]:
    """The normalised words the model reads (uncapped for the vocabulary and the IDF table)."""
    return [normalize(parsed.tokens[i]) for i in _positions(parsed, cap)]

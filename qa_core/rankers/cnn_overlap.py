"""CNN_WO+SO (Nicosia 2018, thesis section 6.4): SM-CNN's sentence CNNs over words extended with a
word-overlap (WO) and a semantic-overlap (SO) embedding; CNN_WO is the same network without SO.
See ``shared/papers/rel-tree-kernels-and-cnn-wo-so.md``.

Per word the input is [GloVe 50d, frozen; WO 5d; SO 5d]:

- WO looks up 1 when the word (normalised, not a stopword or punctuation, as in the thesis's
  Figure 6.3 "when we do not consider stopwords") also occurs in the other text, else 0.
- SO looks up the question class id (1..6, ``QuestionAnalysis.class_id``) on the question's focus
  word and on every answer word inside a named entity (spaCy, OntoNotes types) whose type fits the
  class (``qa_core.structure.rel.CLASS_ENTITY_TYPES``, thesis Table 6.5); everything else is 0.

Class and focus come from a ``QuestionAnalyzer``: with the default ``analysis="auto"`` the one
``fit`` is given (the app passes the store's trained class CNN and focus tagger), else the
documented wh-word rules. The analyzer, classifiers included, is saved inside the checkpoint, so a
loaded model analyses new questions exactly as it did in training and needs no other file.
When the rules find a class but no focus ("Why ..."), the answer entities still get the class id.

Separate question and answer convolutions (width 5, 100 filters) with max-pooling, the two pooled
vectors concatenated, a 200-d ReLU layer, dropout 0.5 and a softmax over {irrelevant, relevant};
no bilinear similarity and no overlap feature vector. L2 1e-5 on the filters, 1e-4 on the rest;
Adam (lr 5e-5, eps 1e-5), batch 50, 30 epochs, the state with the best dev MAP; texts capped at 60
words. Deviations: GloVe 6B 50d instead of the thesis's word2vec vectors; the convolution is
SM-CNN's wide, masked one (the shared ``ConvEncoder``): the thesis's narrow one over texts
zero-padded to 60 words scored lower on WikiQA DEV (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from qa_core.classifiers.analysis import QuestionAnalysis, QuestionAnalyzer
from qa_core.data.questions import COARSE_CLASSES
from qa_core.nn.attribution import EmbeddedInputs, gradient_norm
from qa_core.nn.encoders import PAD_ID, ConvEncoder, WordEmbedding
from qa_core.rankers.analysis_channel import AnalysisReadingRanker
from qa_core.rankers.base import Explanation
from qa_core.rankers.neural import NEURAL, NeuralConfig, Pair, spread, token_positions
from qa_core.structure.rel import CLASS_ENTITY_TYPES, rel_tag
from qa_core.text.features import content_words, is_content_word
from qa_core.text.nlp import Parsed
from qa_core.text.vectors import normalize
from qa_core.training import loop
from qa_core.training.batching import pad_ids, trim_padding
from qa_core.types import InputError

ANALYSIS_MODES = ("auto", "heuristic")


@dataclass(frozen=True)
class CNNOverlapConfig(NeuralConfig):
    """The thesis's settings; ``semantic_overlap=False`` is CNN_WO."""

    filters: int = 100
    width: int = 5
    hidden: int = 200
    dropout: float = 0.5
    overlap_dim: int = 5
    semantic_dim: int = 5
    semantic_overlap: bool = True
    analysis: str = "auto"  # "auto": the analyzer fit is given (else rules); "heuristic": rules
    l2_conv: float = 1e-5
    l2_other: float = 1e-4
    lr: float = 5e-5
    batch_size: int = 50
    max_epochs: int = 30
    patience: int = 30  # the thesis trains all 30 epochs and keeps the best dev MAP
    eval_every: int = 50
    max_question_len: int = 60
    max_answer_len: int = 60


@dataclass(frozen=True)
class CNNWOConfig(CNNOverlapConfig):
    semantic_overlap: bool = False


class OverlapCNN(nn.Module):
    """Words + WO (+ SO) embeddings -> two ConvEncoders -> 200-d ReLU -> dropout -> 2 logits."""

    def __init__(self, vectors: torch.Tensor, config: CNNOverlapConfig):
        super().__init__()
        self.embedding = WordEmbedding(vectors, trainable=config.trainable_embeddings)
        self.overlap = nn.Embedding(2, config.overlap_dim)
        self.semantic = nn.Embedding(len(COARSE_CLASSES) + 1, config.semantic_dim) if config.semantic_overlap else None
        dim = self.embedding.dim + config.overlap_dim + (config.semantic_dim if config.semantic_overlap else 0)
        self.question_encoder = ConvEncoder(dim, config.filters, config.width)
        self.answer_encoder = ConvEncoder(dim, config.filters, config.width)
        self.hidden = nn.Linear(2 * config.filters, config.hidden)
        self.dropout = nn.Dropout(config.dropout)
        self.output = nn.Linear(config.hidden, 2)

    def words(self, ids: torch.Tensor, overlap: torch.Tensor, semantic: torch.Tensor) -> torch.Tensor:
        """(batch, length) ids and feature ids -> (batch, length, dim) word inputs (w; wo; so)."""
        parts = [self.embedding(ids), self.overlap(overlap)]
        if self.semantic is not None:
            parts.append(self.semantic(semantic))
        return torch.cat(parts, dim=-1)

    def forward(
        self,
        question: torch.Tensor,
        answer: torch.Tensor,
        question_overlap: torch.Tensor,
        answer_overlap: torch.Tensor,
        question_semantic: torch.Tensor,
        answer_semantic: torch.Tensor,
    ) -> torch.Tensor:
        question, answer = trim_padding(question), trim_padding(answer)
        q_len, a_len = question.shape[1], answer.shape[1]
        q_in = self.words(question, question_overlap[:, :q_len], question_semantic[:, :q_len])
        a_in = self.words(answer, answer_overlap[:, :a_len], answer_semantic[:, :a_len])
        return self.classify(q_in, question != PAD_ID, a_in, answer != PAD_ID)

    def classify(
        self, question: torch.Tensor, question_mask: torch.Tensor, answer: torch.Tensor, answer_mask: torch.Tensor
    ) -> torch.Tensor:
        """Logits from the (w; wo; so) word inputs, the entry point for gradient saliency."""
        joined = torch.cat(
            [self.question_encoder(question, question_mask), self.answer_encoder(answer, answer_mask)], dim=-1
        )
        return self.output(self.dropout(torch.relu(self.hidden(joined))))


def overlap_ids(parsed: Parsed, other: Parsed, positions: Sequence[int]) -> list[int]:
    """WO per model word: 1 for a content word that also occurs in ``other``."""
    shared = content_words(parsed) & content_words(other)
    return [int(is_content_word(parsed, i) and normalize(parsed.tokens[i]) in shared) for i in positions]


def question_semantic_ids(analysis: QuestionAnalysis, positions: Sequence[int]) -> list[int]:
    """SO per question model word: the class id on the focus word, else 0."""
    return [analysis.class_id if i == analysis.focus else 0 for i in positions]


def answer_semantic_ids(answer: Parsed, analysis: QuestionAnalysis, positions: Sequence[int]) -> list[int]:
    """SO per answer model word: the class id inside an entity whose type fits the class, else 0."""
    wanted = CLASS_ENTITY_TYPES.get(analysis.qclass or "", frozenset())
    inside = {i for start, end, label in answer.ents if label in wanted for i in range(start, end)}
    return [analysis.class_id if i in inside else 0 for i in positions]


class CNNOverlapRanker(AnalysisReadingRanker):
    name = "cnn_wo_so"
    title = "CNN_WO+SO: word and semantic overlap (Nicosia 2018, ch. 6)"
    config_class = CNNOverlapConfig
    config: CNNOverlapConfig
    _feature_names = ("question_overlap", "answer_overlap", "question_semantic", "answer_semantic")

    def __init__(self, config: CNNOverlapConfig | None = None):
        super().__init__(config)
        if self.config.analysis not in ANALYSIS_MODES:
            raise InputError(f"analysis must be one of {', '.join(ANALYSIS_MODES)}, not {self.config.analysis!r}")

    # ------------------------------------------------------------------ hooks

    def reads_analysis(self) -> bool:
        return self.config.semantic_overlap

    def analyzer_to_keep(self, given: QuestionAnalyzer | None) -> QuestionAnalyzer:
        """The given analyzer only with ``analysis="auto"``; the wh-word rules otherwise."""
        return given if self.config.analysis == "auto" and given is not None else QuestionAnalyzer()

    def build_model(self, vectors: torch.Tensor) -> OverlapCNN:
        return OverlapCNN(vectors, self.config)

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        cfg = self.config
        groups = loop.weight_decay_groups(model, default=cfg.l2_other, by_module_type={nn.Conv1d: cfg.l2_conv})
        return torch.optim.Adam(groups, lr=cfg.lr, eps=1e-5)

    def extra_inputs(self, pairs: Sequence[Pair]) -> dict[str, torch.Tensor]:
        """WO and SO ids per model word, row- and position-aligned with the word ids."""
        cfg = self.config
        rows: dict[str, list[list[int]]] = {name: [] for name in self._feature_names}
        for pair, analysis in zip(pairs, self.analyses(pairs)):
            q_pos = token_positions(pair.question, cfg.max_question_len)
            a_pos = token_positions(pair.answer, cfg.max_answer_len)
            rows["question_overlap"].append(overlap_ids(pair.question, pair.answer, q_pos))
            rows["answer_overlap"].append(overlap_ids(pair.answer, pair.question, a_pos))
            rows["question_semantic"].append(question_semantic_ids(analysis, q_pos))
            rows["answer_semantic"].append(answer_semantic_ids(pair.answer, analysis, a_pos))
        return {name: pad_ids(values) for name, values in rows.items()}

    # ------------------------------------------------------------------ explanation

    def explain_pair(self, pair: Pair) -> Explanation:
        """Gradient saliency of P(relevant) per word; lexical REL links and, with SO, the
        REL-FOCUS-<class> links from the focus chunk to the fitting answer entities."""
        model = self.model()
        model.eval()
        analysis = self.analyses([pair])[0]
        inputs = {name: tensor.to(self._device) for name, tensor in self.encode([pair]).items()}
        q_ids, a_ids = inputs["question"], inputs["answer"]
        q_in = model.words(q_ids, inputs["question_overlap"], inputs["question_semantic"])
        a_in = model.words(a_ids, inputs["answer_overlap"], inputs["answer_semantic"])
        embedded = EmbeddedInputs(
            (q_in, a_in), lambda q, a: self.relevance(model.classify(q, q_ids != PAD_ID, a, a_ids != PAD_ID))
        )
        (q_saliency, a_saliency), score = gradient_norm(embedded)
        cfg = self.config
        q_parsed, a_parsed = pair.question, pair.answer
        # Focus links only where the model reads the question analysis (CNN_WO+SO, not CNN_WO).
        links = rel_tag(q_parsed, a_parsed, analysis.focus, analysis.qclass).links
        return Explanation(
            score=score,
            question_tokens=list(q_parsed.tokens),
            answer_tokens=list(a_parsed.tokens),
            answer_weights=spread(a_saliency, token_positions(a_parsed, cfg.max_answer_len), len(a_parsed.tokens)),
            question_weights=spread(
                q_saliency, token_positions(q_parsed, cfg.max_question_len), len(q_parsed.tokens)
            ),
            weight_kind="saliency",
            links=links,
        )


class CNNWORanker(CNNOverlapRanker):
    """CNN_WO: the ablation without semantic overlap (no question analysis at all)."""

    name = "cnn_wo"
    title = "CNN_WO: word overlap only (Nicosia 2018, ch. 6)"
    config_class = CNNWOConfig
    capabilities = NEURAL

"""What every neural ranker shares: text -> tensors, training through the shared loop, batched
scoring on the GPU or the CPU, and checkpoints.

A model module adds only what differs: its network (``build_model``), any inputs beyond the word
ids (``extra_inputs``), its optimizer, and its ``explain``. SM-CNN, CNN_WO+SO, MP-HCNN, the
attention LSTM and global-local attention all sit on this class, so none of them re-implements
vocabularies, batching, dev-MAP selection or checkpoints.

Word vectors. A frozen GloVe table is *open-vocabulary*: a word first met at scoring time that
GloVe knows gets its GloVe row, appended to the table, exactly as if the vocabulary had been built
over that text too (frozen rows never change, so no score of an earlier pool moves). Other unseen
words map to UNK. A trainable table cannot do that (an appended row would be untrained), so there
every unseen word maps to UNK.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from qa_core.device import default_device, precision
from qa_core.nn.attribution import EmbeddedInputs, substituted
from qa_core.nn.encoders import WordEmbedding
from qa_core.rankers.base import (
    CandidateInput,
    Capabilities,
    EmbeddedPair,
    Explanation,
    Pool,
    Ranker,
    RankerConfig,
    as_candidates,
    candidate_at,
    split_by_sizes,
)
from qa_core.text.features import IdfTable
from qa_core.text.nlp import Parsed, parse_many
from qa_core.text.vectors import Vocabulary, embedding_matrix, glove_vectors, normalize
from qa_core.training import loop
from qa_core.training.batching import TensorBatches, pad_ids
from qa_core.training.events import ProgressCallback
from qa_core.types import InputError, NotTrainedError, Question

if TYPE_CHECKING:
    from qa_core.classifiers.analysis import QuestionAnalyzer


@dataclass(frozen=True)
class Pair:
    """One (question, candidate) input: both parses, and what the first stage knew of the candidate."""

    question: Parsed
    answer: Parsed
    first_stage_rank: int | None = None
    url: str | None = None


@dataclass(frozen=True)
class NeuralConfig(RankerConfig):
    """Settings every neural ranker has; a model's config subclasses this with its own fields."""

    batch_size: int = 50
    max_epochs: int = 25
    eval_every: int = 10  # mini-batches between dev-MAP checks
    patience: int = 5  # epochs without a dev improvement before stopping
    max_question_len: int = 60
    max_answer_len: int = 100
    score_batch_size: int = 500
    trainable_embeddings: bool = False


def token_positions(parsed: Parsed, cap: int | None = None) -> list[int]:
    """Indices of the tokens a model reads: non-whitespace, the first ``cap`` of them."""
    return [i for i, token in enumerate(parsed.tokens) if token.strip()][:cap]


def model_words(parsed: Parsed, cap: int | None = None) -> list[str]:
    """The normalised words a model reads (uncapped for vocabularies and IDF tables)."""
    return [normalize(parsed.tokens[i]) for i in token_positions(parsed, cap)]


def spread(values: Sequence[float], positions: Sequence[int], length: int) -> list[float]:
    """Per-model-word values placed on all ``length`` tokens; tokens the model did not read get 0."""
    weights = [0.0] * length
    for value, position in zip(values, positions):
        weights[position] = float(value)
    return weights


NEURAL = Capabilities(
    trainable=True,
    neural=True,
    training_settings=("max_epochs",),
    explains=frozenset({"answer_weights", "question_weights", "links"}),
)
"""What every neural ranker can do; a model widens it (matrices, first-stage rank, URL, analysis)."""


class NeuralRanker(Ranker):
    """Template for the neural rankers; subclasses set ``name``, ``config_class`` and the hooks."""

    config_class = NeuralConfig
    capabilities = NEURAL
    config: NeuralConfig

    def __init__(self, config: NeuralConfig | None = None):
        super().__init__(config)
        self._device = default_device()
        self._model: nn.Module | None = None
        self.vocabulary: Vocabulary | None = None
        self.idf: IdfTable | None = None
        self._grow_lock = threading.Lock()

    @property
    def device(self) -> str:
        return str(self._device)

    def to(self, device: str) -> NeuralRanker:
        """Score (and train) on ``device`` from now on, e.g. a batch job's chosen GPU; returns self."""
        self._device = torch.device(device)
        if self._model is not None:
            self._model.to(self._device)
        return self

    # ------------------------------------------------------------------ hooks

    @abstractmethod
    def build_model(self, vectors: torch.Tensor) -> nn.Module:
        """The untrained network; it reads words through ``self.embedding``, a ``WordEmbedding`` over ``vectors``."""

    @abstractmethod
    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        """The optimizer, with the model's L2 strengths as parameter groups."""

    def extra_inputs(self, pairs: Sequence[Pair]) -> dict[str, torch.Tensor]:
        """Model inputs beyond ``question`` and ``answer`` ids (overlap features, ranks, ...), row-aligned."""
        return {}

    def relevance(self, output: torch.Tensor) -> torch.Tensor:
        """Model output -> one float64 relevance score per row; default P(relevant) of 2-class logits.

        float64 softmax: near-certain candidates must not tie at 1.0 (the ranking needs them apart).
        """
        return torch.softmax(output.double(), dim=-1)[:, 1]

    def loss(self) -> nn.Module:
        return nn.CrossEntropyLoss()

    def training_batches(self, examples: Sequence[tuple[Pair, int]]) -> loop.BatchFactory:
        """The mini-batches ``fit`` trains on: ``batches`` of the encoded examples."""
        return self.batches(*self.grouped_examples(examples))

    def batches(self, inputs: dict[str, torch.Tensor], groups: torch.Tensor, labels: torch.Tensor) -> loop.BatchFactory:
        """Pointwise mini-batches of (inputs, class id: relevant when label > 0) from encoded
        examples (``grouped_examples``); pairwise and listwise models override this. Apart from
        ``training_batches`` so that encoded examples train without their texts (benchmarks/gpu_check.py)."""
        targets = (labels > 0).long().to(self._device)
        return TensorBatches(inputs, targets, self.config.batch_size)

    def grouped_examples(
        self, examples: Sequence[tuple[Pair, int]]
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
        """Encoded inputs on the device, each row's question id (questions by text) and its label: what
        batches of whole pools, or of pairs within one question, are cut from."""
        inputs = self.encode([pair for pair, _ in examples])
        question_ids: dict[str, int] = {}
        groups = torch.tensor([question_ids.setdefault(p.question.text, len(question_ids)) for p, _ in examples])
        labels = torch.tensor([label for _, label in examples])
        return {name: tensor.to(self._device) for name, tensor in inputs.items()}, groups, labels

    def prepare(
        self, train: Sequence[Question], dev: Sequence[Question], seed: int, analyzer: QuestionAnalyzer | None
    ) -> None:
        """Fit anything besides vocabulary and IDF before the model is built; keep ``analyzer`` if
        the model reads question analysis."""

    @abstractmethod
    def explain_pair(self, pair: Pair) -> Explanation:
        """The explanation of one encoded pair (``explain`` adds what every model shares)."""

    def extra_state(self) -> dict[str, Any]:
        """What ``prepare`` built, for the checkpoint."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        """Inverse of ``extra_state``."""

    # ------------------------------------------------------------------ text -> tensors

    def model(self) -> nn.Module:
        """The trained network; ``NotTrainedError`` before ``fit`` or a checkpoint load."""
        if self._model is None:
            raise NotTrainedError(
                f"{self.name} is not trained yet: train it on a dataset (fit) or load a checkpoint before scoring"
            )
        return self._model

    def pool_pairs(self, pools: Sequence[Pool]) -> list[Pair]:
        """Every (question, candidate) of the pools, each distinct text parsed once."""
        records = [(question, c) for question, cands in pools for c in as_candidates(cands)]
        texts = list(dict.fromkeys(t for question, c in records for t in (question, c.text)))
        parsed = dict(zip(texts, parse_many(texts)))
        return [Pair(parsed[q], parsed[c.text], c.first_stage_rank, c.url) for q, c in records]

    def word_ids(self, parsed: Sequence[Parsed], cap: int) -> torch.Tensor:
        """(rows, longest) padded ids of the first ``cap`` words; see the module docstring on unseen words."""
        words = [model_words(p, cap) for p in parsed]
        if not self.model().embedding.trainable:
            self._grow_vocabulary({w for row in words for w in row})
        return pad_ids([self.vocabulary.encode(row) for row in words])

    def _grow_vocabulary(self, words: set[str]) -> None:
        """Append GloVe rows for unseen words that GloVe knows (frozen tables only)."""
        with self._grow_lock:
            unseen = sorted(w for w in words if w not in self.vocabulary)
            vectors = glove_vectors(unseen) if unseen else {}  # nothing new: GloVe is not even opened
            if not vectors:
                return
            embedding: WordEmbedding = self.model().embedding
            self.vocabulary = self.vocabulary.extended(list(vectors))
            embedding.append_rows(torch.as_tensor(np.stack(list(vectors.values()))))

    def encode(self, pairs: Sequence[Pair]) -> dict[str, torch.Tensor]:
        """CPU tensors, one row per pair: ``question`` and ``answer`` ids plus ``extra_inputs``."""
        cfg = self.config
        inputs = {
            "question": self.word_ids([p.question for p in pairs], cfg.max_question_len),
            "answer": self.word_ids([p.answer for p in pairs], cfg.max_answer_len),
        }
        inputs.update(self.extra_inputs(pairs))
        return inputs

    # ------------------------------------------------------------------ scoring

    def predict(self, inputs: dict[str, torch.Tensor]) -> np.ndarray:
        """Relevance per row in batches of ``score_batch_size``, in eval mode, without autograd (under
        autocast when ``RERANK_LAB_AMP`` is on: ``qa_core.device.precision``)."""
        model = self.model()
        model.eval()
        count, step = len(inputs["question"]), self.config.score_batch_size
        chunks = []
        with torch.inference_mode(), precision(self._device):
            for start in range(0, count, step):
                batch = {name: tensor[start : start + step].to(self._device) for name, tensor in inputs.items()}
                chunks.append(self.relevance(model(**batch)).cpu())
        return torch.cat(chunks).numpy() if chunks else np.zeros(0)

    def score_pools(self, pools: Sequence[Pool]) -> list[np.ndarray]:
        """All pools' pairs in shared batches, split back per pool."""
        self.model()
        pairs = self.pool_pairs(pools)
        scores = self.predict(self.encode(pairs)) if pairs else np.zeros(0)
        return split_by_sizes(scores, [len(candidates) for _, candidates in pools])

    def explain(self, question: str, candidates: Sequence[CandidateInput], index: int) -> Explanation:
        """The model's explanation of candidate ``index`` (a pair's score does not depend on its
        pool), marking where the model stopped reading a long answer."""
        self.model()
        pair = self.pool_pairs([(question, [candidate_at(candidates, index)])])[0]
        with precision(self._device):  # as the ranked score was computed
            explanation = self.explain_pair(pair)
        read = token_positions(pair.answer)
        if len(read) > self.config.max_answer_len:
            explanation.answer_tokens_read = read[self.config.max_answer_len - 1] + 1
        return explanation

    def embedded_pair(self, question: str, candidates: Sequence[CandidateInput], index: int) -> EmbeddedPair:
        """The pair's question and answer words through the embedding table, and a forward that
        scores a batch of varied embedded words through the model's own ``forward`` (the table's
        output substituted; every other input repeated), in eval mode."""
        model = self.model()
        model.eval()
        pair = self.pool_pairs([(question, [candidate_at(candidates, index)])])[0]
        inputs = {name: tensor.to(self._device) for name, tensor in self.encode([pair]).items()}
        with torch.no_grad():
            words = (model.embedding(inputs["question"]), model.embedding(inputs["answer"]))

        def forward(q_words: torch.Tensor, a_words: torch.Tensor) -> torch.Tensor:
            rows = q_words.shape[0]
            batch = {name: tensor.expand(rows, *tensor.shape[1:]) for name, tensor in inputs.items()}
            with substituted(model.embedding, {batch["question"]: q_words, batch["answer"]: a_words}):
                return self.relevance(model(**batch))

        cfg = self.config
        return EmbeddedPair(
            EmbeddedInputs(words, forward),
            token_positions(pair.question, cfg.max_question_len),
            token_positions(pair.answer, cfg.max_answer_len),
            len(pair.question.tokens),
            len(pair.answer.tokens),
        )

    # ------------------------------------------------------------------ training

    def fit(self, train: Sequence[Question], dev: Sequence[Question], *, seed: int = 1,
            analyzer: QuestionAnalyzer | None = None, progress: bool = True,
            callback: ProgressCallback | None = None) -> dict[str, Any]:
        """Train on the labelled candidates of ``train``; keep the state with the best dev MAP.

        The vocabulary covers the train and dev texts (no labels involved), the IDF table the train
        candidates. Returns the loop's report plus the pair and vocabulary counts.
        """
        from qa_core.evaluation import evaluate, qrels_from_questions, run_from_scores  # ir-measures: not on a GPU node

        examples_of = [(q, c) for q in train for c in q.candidates if c.label is not None]
        dev_questions = [q for q in dev if any(c.label is not None for c in q.candidates)]
        if not examples_of:
            raise InputError(f"{self.name} needs labelled candidates in the training split")
        if not dev_questions:
            raise InputError(f"{self.name} needs labelled candidates in the dev split to select a model")

        texts = list(dict.fromkeys(t for q in [*train, *dev] for t in (q.text, *(c.text for c in q.candidates))))
        parsed = dict(zip(texts, parse_many(texts)))
        self.vocabulary = Vocabulary.build([model_words(p) for p in parsed.values()])
        self.idf = IdfTable.fit(model_words(parsed[c.text]) for q in train for c in q.candidates)
        loop.seed_everything(seed)
        self.prepare(train, dev, seed, analyzer)
        vectors = torch.as_tensor(embedding_matrix(self.vocabulary, seed))
        self._model = self.build_model(vectors).to(self._device)

        examples = [
            (Pair(parsed[q.text], parsed[c.text], c.first_stage_rank, c.url), c.label) for q, c in examples_of
        ]
        dev_pools = [(q.text, q.candidates) for q in dev_questions]
        dev_inputs = self.encode(self.pool_pairs(dev_pools))
        dev_sizes = [len(q.candidates) for q in dev_questions]
        dev_qrels = qrels_from_questions(dev_questions)

        def dev_map() -> float:
            run = run_from_scores(dev_questions, split_by_sizes(self.predict(dev_inputs), dev_sizes))
            return evaluate(run, dev_qrels).aggregate["map"]

        cfg = self.config
        report = loop.train(
            self._model,
            self.make_optimizer(self._model),
            self.loss(),
            self.training_batches(examples),
            dev_map,
            eval_every=cfg.eval_every,
            max_epochs=cfg.max_epochs,
            patience=cfg.patience,
            seed=seed,
            progress=progress,
            callback=callback,
        )
        report["train_pairs"] = len(examples)
        report["vocabulary"] = len(self.vocabulary)
        return report

    # ------------------------------------------------------------------ persistence

    def state(self) -> dict[str, Any]:
        model = self.model()
        return {
            **super().state(),
            "vocabulary": self.vocabulary.to_list(),
            "embeddings": model.embedding.weight.detach().cpu(),
            "idf": self.idf.to_dict(),
            "model": {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()},
            "extra": self.extra_state(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> NeuralRanker:
        ranker = cls(cls.configure(**state["config"]))
        ranker.vocabulary = Vocabulary.from_list(state["vocabulary"])
        ranker.idf = IdfTable.from_dict(state["idf"])
        ranker.load_extra_state(state.get("extra", {}))
        model = ranker.build_model(state["embeddings"])
        model.load_state_dict(state["model"])
        ranker._model = model.to(ranker._device).eval()
        return ranker

"""The ranker contract every model honours (baselines, neural models, the tree kernel).

Modelled on sentence-transformers' ``CrossEncoder``: ``score`` gives one number per candidate of a
question's pool and ``rank`` sorts them in a few lines on top; training lives outside the model's
forward pass (``fit`` drives the shared loop). As LIT's model specs do, a ranker *declares* what it
can do (``Capabilities``: trainable or not, which training settings it takes, which explanation
parts it fills, what it reads besides the texts), so callers read the declaration and never probe
classes.

The request path is typed: candidates are ``Candidate`` records (a plain string is accepted for
convenience and becomes a record whose doc_id is its position), ``rank`` returns
``ScoredCandidate`` records that keep them, and ``explain`` takes the candidate *in its pool*, so
an explanation is always of the very input that was scored: its ``score`` equals the ranked score
(``tests/ranker_contract.py``'s checks, run over every registered model by
``tests/test_every_model.py``).

A module of this package that defines a concrete subclass with a ``name`` adds a model: ``registry``
finds it there, so adding a model means writing one file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

import numpy as np

from qa_core import ordering
from qa_core.nn.attribution import EmbeddedInputs
from qa_core.text.links import Link
from qa_core.training.events import ProgressCallback
from qa_core.types import Candidate, InputError, Question

if TYPE_CHECKING:
    from qa_core.classifiers.analysis import QuestionAnalysis, QuestionAnalyzer

ExplanationPart = Literal["answer_weights", "question_weights", "matrices", "links", "trees"]
Input = Literal["first_stage_rank", "url", "question_analysis"]


@dataclass(frozen=True)
class Capabilities:
    """What a ranker can do, declared once on its class.

    ``trainable``: ``fit`` trains it on labels, and it must be trained (or loaded) before scoring.
    ``learns_statistics``: untrained it scores, but ``fit`` learns label-free statistics (IDF) of a
    dataset's text that the app fits it on. ``training_settings``: the config fields a training job
    may set (the Train page's inputs), e.g. ``max_epochs``. ``explains``: the ``Explanation`` parts
    its ``explain`` fills. ``reads``: what it reads besides the two texts (a page says so, a batch
    job must supply it). ``pool_dependent``: a candidate's score
    depends on the rest of its pool (BM25's IDF is the pool's), so an edited candidate must be
    scored inside its pool; otherwise a pair's score is its own. ``neural``: a torch network that
    ``to(device)`` moves, so it scores and trains on a GPU (``benchmarks/gpu_check.py`` checks each),
    and whose embedded words ``embedded_pair`` gives, for gradient attributions (``qa_core.explain``).
    ``own_weights``: the shared explainer (``qa_core.explain.explainers``) that its ``explain``
    weights already are, so a page offers that computation once, under that name (a scoring
    service's are ``"occlusion"``); ``None``: weights of its own (attention, BM25 shares, ...).
    """

    trainable: bool = False
    neural: bool = False
    learns_statistics: bool = False
    pool_dependent: bool = False
    training_settings: tuple[str, ...] = ()
    explains: frozenset[ExplanationPart] = frozenset({"answer_weights"})
    reads: frozenset[Input] = frozenset()
    own_weights: str | None = None

    def __post_init__(self) -> None:
        unknown = set(self.explains) - set(get_args(ExplanationPart)) | set(self.reads) - set(get_args(Input))
        if unknown:
            raise ValueError(f"unknown capability {sorted(unknown)}")


@dataclass(frozen=True)
class RankerConfig:
    """Base of every ranker's settings; a model's config subclasses it (and may add nothing)."""


@dataclass
class Explanation:
    """Why a ranker scored one (question, candidate) pair as it did.

    ``answer_weights`` holds one raw value per answer token (attention, saliency, match mass; the
    app scales it per candidate for colour and shows the raw value on hover), ``question_weights``
    the same for question tokens where the model has them. ``matrices`` holds named question-token x
    answer-token matrices (similarity, attention, match levels), ``links`` the question-answer links
    the model read or drew, ``trees`` the structures a tree-kernel model compared, in bracket
    notation. ``answer_tokens_read``: how many answer tokens the model read (the rest cannot change
    the score), ``None`` when it read them all.
    """

    score: float
    question_tokens: list[str]
    answer_tokens: list[str]
    answer_weights: list[float]
    weight_kind: str = "saliency"
    question_weights: list[float] | None = None
    matrices: dict[str, list[list[float]]] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    trees: dict[str, str] = field(default_factory=dict)
    answer_tokens_read: int | None = None


@dataclass(frozen=True)
class EmbeddedPair:
    """One pair as a neural ranker reads it, for attribution methods: the embedded question and
    answer words (``embedded.inputs``, in that order) with the batched score over them, the token
    positions each embedded word stands for, and the token counts of both texts."""

    embedded: EmbeddedInputs
    question_positions: list[int]
    answer_positions: list[int]
    question_length: int
    answer_length: int


@dataclass(frozen=True)
class ScoredCandidate:
    """A candidate of a ranked pool: the record itself, its score, its rank by this model (1-based)
    and its position in the pool as given (what ``explain`` takes)."""

    candidate: Candidate
    score: float
    rank: int
    index: int

    @property
    def rank_change(self) -> int | None:
        """First-stage rank minus this rank: positive when the model moved the candidate up."""
        first = self.candidate.first_stage_rank
        return None if first is None else first - self.rank


CandidateInput = str | Candidate
Pool = tuple[str, Sequence[CandidateInput]]


def as_candidates(candidates: Sequence[CandidateInput]) -> list[Candidate]:
    """Records for a pool: strings become candidates whose doc_id is their position."""
    return [c if isinstance(c, Candidate) else Candidate(str(i), c) for i, c in enumerate(candidates)]


def candidate_texts(candidates: Sequence[CandidateInput]) -> list[str]:
    """The pool's texts, in order (what a model that reads no record fields scores)."""
    return [c.text for c in as_candidates(candidates)]


def split_by_sizes(scores: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """Scores of pools scored in one flat batch, split back into one array per pool (in order)."""
    bounds = np.cumsum([0, *sizes])
    return [scores[start:end] for start, end in zip(bounds[:-1], bounds[1:], strict=True)]


def candidate_at(candidates: Sequence[CandidateInput], index: int) -> Candidate:
    """The pool's candidate ``index`` as a record; ``InputError`` outside the pool."""
    if not 0 <= index < len(candidates):
        raise InputError(f"no candidate {index + 1} in a pool of {len(candidates)}")
    return as_candidates(candidates)[index]


class Ranker(ABC):
    """Scores a question's candidate pool. Subclasses set ``name``, ``title``, ``capabilities`` and,
    when they have settings, ``config_class``; one constructor form: ``Ranker(config)``."""

    name: ClassVar[str]
    title: ClassVar[str]  # what the model is, for tables: "SM-CNN (Severyn & Moschitti 2015)"
    config_class: ClassVar[type[RankerConfig]] = RankerConfig
    capabilities: ClassVar[Capabilities] = Capabilities()

    def __init__(self, config: RankerConfig | None = None) -> None:
        if config is not None and not isinstance(config, self.config_class):
            raise TypeError(f"{self.name} takes a {self.config_class.__name__}, not {type(config).__name__}")
        self.config = config if config is not None else self.config_class()

    @classmethod
    def configure(cls, **settings: Any) -> RankerConfig:
        """The config with ``settings`` changed; ``InputError`` naming the ones this model lacks.

        JSON lists become tuples, so a config read back from a job or a checkpoint compares equal.
        """
        known = {f.name for f in fields(cls.config_class)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise InputError(
                f"model {cls.name!r} has no setting {', '.join(map(repr, unknown))}; "
                f"its settings: {', '.join(sorted(known)) or 'none'}"
            )
        return cls.config_class(**{k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()})

    # ------------------------------------------------------------------ scoring

    @abstractmethod
    def score_pools(self, pools: Sequence[Pool]) -> list[np.ndarray]:
        """One float64 score array per (question, candidates) pool, higher is more relevant."""

    def score(self, question: str, candidates: Sequence[CandidateInput]) -> np.ndarray:
        return self.score_pools([(question, candidates)])[0]

    def covered(self, pools: Sequence[Pool]) -> list[np.ndarray]:
        """Which candidates of each pool this ranker really ranks (one boolean array per pool): a
        model, every one; a stored run, only the pairs in it. Its scores of the others only place
        them last, so a depth-k pool, a queue order or an agreement leaves them out."""
        return [np.ones(len(candidates), dtype=bool) for _, candidates in pools]

    def rank(self, question: str, candidates: Sequence[CandidateInput], top_k: int | None = None) -> list[ScoredCandidate]:
        """The pool best first (ties by ``qa_core.ordering``'s rule), each candidate with its score and rank."""
        records = as_candidates(candidates)
        scores = self.score(question, records)
        order = ordering.order([r.doc_id for r in records], scores)[:top_k]
        return [ScoredCandidate(records[i], float(scores[i]), rank, int(i)) for rank, i in enumerate(order, start=1)]

    def score_edits(
        self, question: str, candidates: Sequence[CandidateInput], index: int, texts: Sequence[str]
    ) -> np.ndarray:
        """The score of candidate ``index`` with its text replaced by each of ``texts``: the one path
        of counterfactual edits and of the faithfulness deletions. The edited candidate keeps its
        record (doc_id, first-stage rank, URL); a pool-dependent model scores it inside its pool."""
        records = as_candidates(candidates)
        edited = [replace(candidate_at(records, index), text=text) for text in texts]
        if not self.capabilities.pool_dependent:
            return self.score(question, edited) if edited else np.zeros(0)
        pools = [(question, [*records[:index], record, *records[index + 1 :]]) for record in edited]
        return np.array([scores[index] for scores in self.score_pools(pools)], dtype=np.float64)

    @abstractmethod
    def explain(self, question: str, candidates: Sequence[CandidateInput], index: int) -> Explanation:
        """Why candidate ``index`` of this pool scored as it did; ``score`` equals its pool score."""

    def embedded_pair(self, question: str, candidates: Sequence[CandidateInput], index: int) -> EmbeddedPair:
        """Candidate ``index``'s pair as embedded words (``capabilities.neural`` models only)."""
        raise InputError(f"model {self.name!r} reads no embedded words")

    def question_analysis(self, question: str) -> QuestionAnalysis | None:
        """The class and focus this model reads for ``question`` (``None``: it reads none)."""
        return None

    # ------------------------------------------------------------------ training and persistence

    def fit(self, train: Sequence[Question], dev: Sequence[Question], *, seed: int = 1,
            analyzer: QuestionAnalyzer | None = None, progress: bool = True,
            callback: ProgressCallback | None = None) -> dict[str, Any]:
        """Train (or learn statistics) on ``train``, select on ``dev``; returns a report.

        ``analyzer`` is the question analysis for models that read one (``capabilities.reads``);
        it is saved with them, so a loaded model analyses questions as it did in training.
        """
        raise InputError(f"model {self.name!r} has nothing to train")

    def state(self) -> dict[str, Any]:
        """Tensors and plain data that ``from_state`` rebuilds this ranker from (the checkpoint)."""
        return {"config": config_dict(self.config)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Ranker:
        return cls(cls.configure(**state.get("config", {})))

    # ------------------------------------------------------------------ device

    @property
    def device(self) -> str:
        return "cpu"

    def to(self, device: str) -> Ranker:
        """Score (and train) on ``device`` from now on; models without tensors stay on the CPU."""
        return self


def config_dict(config: RankerConfig) -> dict[str, Any]:
    """The config as JSON-able data (tuples as lists), for checkpoints and job records."""
    return {f.name: list(v) if isinstance(v := getattr(config, f.name), tuple) else v for f in fields(config)}

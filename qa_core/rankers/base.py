"""The one ranker interface every model implements (baselines, SM-CNN, later models).

Modelled on sentence-transformers' ``CrossEncoder.predict/rank``: ``score`` gives one number per
candidate of a question's pool, ``rank`` sorts them, ``explain`` says why for one pair.

Candidates are plain strings or ``Candidate`` records: a string is all most models read, while a
record also carries what the first stage knew (rank, URL) for the models that use it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from qa_core.types import Candidate, Question


@dataclass(frozen=True)
class Link:
    """A link between a question token span and an answer token span ([start, end) token indices)."""

    q_start: int
    q_end: int
    a_start: int
    a_end: int
    kind: str  # "REL" for a shared lemma, "REL-FOCUS-<CLASS>" for focus-to-entity links
    label: str = ""  # e.g. the shared lemma, or the entity type


@dataclass
class Explanation:
    """Why a ranker scored one (question, candidate) pair as it did.

    ``answer_weights`` holds one raw value per answer token (attention or saliency; the app scales
    it per candidate for colour and shows the raw value on hover). ``matrices`` holds named
    question-token x answer-token matrices (similarity, match levels); ``trees`` the structures a
    tree-kernel model compared, in bracket notation.
    """

    score: float
    question_tokens: list[str]
    answer_tokens: list[str]
    answer_weights: list[float]
    weight_kind: str = "saliency"
    question_weights: list[float] | None = None
    matrices: dict[str, list[list[float]]] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    trees: dict[str, str] = field(default_factory=dict)  # named trees in bracket notation (REL-tagged)


@dataclass(frozen=True)
class RankedCandidate:
    corpus_id: int  # index into the candidates passed in
    score: float
    text: str


ProgressCallback = Callable[[dict[str, Any]], None]
CandidateInput = str | Candidate


def split_by_sizes(scores: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """Scores of pools scored in one flat batch, split back into one array per pool (in order)."""
    bounds = np.cumsum([0, *sizes])
    return [scores[start:end] for start, end in zip(bounds[:-1], bounds[1:], strict=True)]


def as_candidate(candidate: CandidateInput, index: int = 0) -> Candidate:
    """A ``Candidate`` for a string (doc_id is its position) or the record itself."""
    return candidate if isinstance(candidate, Candidate) else Candidate(str(index), candidate)


def candidate_text(candidate: CandidateInput) -> str:
    return candidate.text if isinstance(candidate, Candidate) else candidate


class Ranker(ABC):
    """Scores a question's candidate pool. Subclasses set ``name`` and register themselves."""

    name: ClassVar[str]
    trainable: ClassVar[bool] = False

    @abstractmethod
    def score(self, question: str, candidates: Sequence[CandidateInput]) -> np.ndarray:
        """One score per candidate (higher is more relevant), float64 array of ``len(candidates)``."""

    def score_pools(self, pools: Sequence[tuple[str, Sequence[CandidateInput]]]) -> list[np.ndarray]:
        """Score many pools; models override this to batch across questions."""
        return [self.score(question, candidates) for question, candidates in pools]

    def rank(
        self, question: str, candidates: Sequence[CandidateInput], top_k: int | None = None
    ) -> list[RankedCandidate]:
        scores = self.score(question, candidates)
        order = np.argsort(-scores, kind="stable")[:top_k]
        return [RankedCandidate(int(i), float(scores[i]), candidate_text(candidates[i])) for i in order]

    @abstractmethod
    def explain(self, question: str, candidate: CandidateInput) -> Explanation:
        """Token weights, matrices and links for one pair."""

    # Training and persistence; rankers with nothing to learn keep these defaults.

    def fit(
        self,
        train: Sequence[Question],
        dev: Sequence[Question],
        *,
        seed: int = 1,
        progress: bool = True,
        callback: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Train on ``train``, select on ``dev``; returns a report (best dev MAP, epochs, seconds)."""
        raise NotImplementedError(f"{self.name} has nothing to train")

    def state(self) -> dict[str, Any]:
        """Everything ``from_state`` needs to rebuild this ranker (tensors, vocab, config)."""
        return {}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Ranker:
        return cls()

    @property
    def device(self) -> str:
        return "cpu"


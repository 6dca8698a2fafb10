"""Model suggestions (issue 21, item 4): what the current model thinks of the pair on screen, and a
model acting as one more annotator in review.

Suggestions anchor annotators, so the page shows them only to an annotator who turns them on. As
an annotator, a model judges a pair "answers" (``MODEL_RELEVANT``) when it ranks it first in its
question's pool and "not relevant" (0) otherwise: scores of different models are not on one
scale, a rank is. A pair whose consensus (the majority of its current labels; adjudicated pairs
are settled already) says relevant (grade > 0) where the model says not, or the other way round,
is a disagreement the review view queues beside the annotators' conflicts. In the agreement view
the same judgements meet each annotator's: Cohen's kappa on relevance (grade > 0: a model judges
relevance, not a grade) over the pairs the annotator labelled and the model ranks (a run lacks the
rest: ``Ranker.covered``), with a bootstrap interval, not shown below ``MIN_SHARED_PAIRS`` pairs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from qa_core import ordering
from qa_core.services.labeling.agreement import (
    MIN_SHARED_PAIRS,
    NO_INTERVAL,
    NOT_ENOUGH,
    Conflict,
    Labels,
    kappa_with_interval,
)
from qa_core.services.labeling.training_labels import training_labels

if TYPE_CHECKING:
    from db.base import CandidateRecord
    from db.store import Store
    from qa_core.rankers.base import Ranker
    from qa_core.types import Question

MODEL_RELEVANT = 3  # "answers": the grade a model's first-ranked candidate stands for
SALIENT_WORDS = 3


@dataclass(frozen=True)
class Suggestion:
    """The model's view of one pair: its score, its rank in the question's pool, and the words
    that weighed most in the score (highest first)."""

    model: str
    score: float
    rank: int
    pool_size: int
    words: list[str]


def suggest(ranker: Ranker, model: str, question: Question, doc_id: str) -> Suggestion:
    """Score the question's own pool and explain candidate ``doc_id`` in it (the ranker contract;
    ``services.ranking`` sits above the labelling services)."""
    pool = list(question.candidates)
    index = next(i for i, c in enumerate(pool) if c.doc_id == doc_id)
    scores = ranker.score(question.text, pool)
    rank = 1 + ordering.order([c.doc_id for c in pool], scores).index(index)  # ties: the one rule, as Ask's
    explanation = ranker.explain(question.text, pool, index)
    weighted = sorted(zip(explanation.answer_weights, explanation.answer_tokens), key=lambda pair: -abs(pair[0]))
    words: list[str] = []
    for _, token in weighted:
        if any(ch.isalnum() for ch in token) and token not in words:
            words.append(token)
        if len(words) == SALIENT_WORDS:
            break
    return Suggestion(model, explanation.score, rank, len(pool), words)


def model_grades(scores: Mapping[int, float], records: Sequence[CandidateRecord]) -> dict[int, int]:
    """The model as an annotator: ``MODEL_RELEVANT`` for each question's best-scored candidate, 0
    for the others (only scored candidates are judged)."""
    by_question: dict[str, list[CandidateRecord]] = defaultdict(list)
    for record in records:
        if record.candidate_id in scores:
            by_question[record.qid].append(record)
    grades = {}
    for pool in by_question.values():
        ids = [r.candidate_id for r in pool]
        best = ids[ordering.order([r.doc_id for r in pool], [scores[c] for c in ids])[0]]  # ties: the one rule
        grades.update({c: MODEL_RELEVANT if c == best else 0 for c in ids})
    return grades


def model_disagreements(store: Store, dataset: str, model: str, scores: Mapping[int, float]) -> list[Conflict]:
    """Pairs whose annotators' consensus and the model disagree on relevance, as conflicts whose
    labels name the model (``model:<name>``) beside the annotators."""
    resolved = training_labels(store, dataset)
    grades = model_grades(scores, resolved.candidates)
    current = store.labels.current_labels(dataset)
    by_id = {r.candidate_id: r for r in resolved.candidates}
    return [
        Conflict(
            candidate_id=c, qid=by_id[c].qid, doc_id=by_id[c].doc_id, question=by_id[c].question,
            candidate=by_id[c].candidate, labels={**dict(sorted(current[c].items())), f"model:{model}": grades[c]},
            gold_label=by_id[c].gold_label,
        )
        for c, label in resolved.labels.items()
        if label.source == "labels" and c in grades and (label.value > 0) != (grades[c] > 0)
    ]


AGREEMENT_COLUMNS = ["annotator", "pairs both judged", "alike", "Cohen's κ", "κ low", "κ high",
                     "annotator: relevant", "model: relevant", "note"]


def annotator_agreement(labels: Labels, grades: Mapping[int, int], seed: int = 0) -> pd.DataFrame:
    """The model (``model_grades``) against each annotator's current labels, one row per annotator:
    over the pairs both judged, the share judged alike, Cohen's kappa on relevance with its 95%
    bootstrap interval (empty below ``MIN_SHARED_PAIRS`` pairs), and how often each said relevant."""
    rows = []
    for annotator in sorted({name for judged in labels.values() for name in judged}):
        shared = [c for c, judged in labels.items() if annotator in judged and c in grades]
        people = [int(labels[c][annotator] > 0) for c in shared]
        model = [int(grades[c] > 0) for c in shared]
        enough = len(shared) >= MIN_SHARED_PAIRS
        kappa, interval = kappa_with_interval(people, model, seed) if enough else (None, NO_INTERVAL)
        rows.append({
            "annotator": annotator, "pairs both judged": len(shared),
            "alike": _share([a == b for a, b in zip(people, model, strict=True)]),
            "Cohen's κ": kappa, "κ low": interval.low, "κ high": interval.high,
            "annotator: relevant": _share(people), "model: relevant": _share(model),
            "note": "" if enough else NOT_ENOUGH,
        })
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def _share(marks: Sequence[int | bool]) -> float | None:
    return sum(marks) / len(marks) if marks else None


def store_annotator_agreement(store: Store, dataset: str, scores: Mapping[int, float]) -> pd.DataFrame:
    """``annotator_agreement`` of the model whose ``scores`` (``model_scores``: a background job's
    snapshot) these are, over the store's current labels of ``dataset``."""
    labels = store.labels.current_labels(dataset)
    return annotator_agreement(labels, model_grades(scores, store.datasets.candidate_rows(dataset)))

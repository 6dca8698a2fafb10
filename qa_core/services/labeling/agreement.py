"""Agreement between annotators over their current labels, and the conflicts a reviewer settles.

- Cohen's kappa per annotator pair (scikit-learn), over the pairs both judged: unweighted, and
  quadratic-weighted, because grades 0..4 are ordinal (3 vs 4 is a smaller disagreement than 0 vs
  4). Both use the full grade scale 0..4 as categories, so the weights are distances between
  grades, not between the grades that happen to occur. For binary labels the two coincide.
- Krippendorff's alpha (the ``krippendorff`` package) over all annotators at once, ordinal level
  by default; it copes with missing judgements, so every pair judged twice or more counts.

A coefficient is ``None`` when it is undefined: no pair judged by both (or by two annotators), or
no variation at all (every judgement the same grade), where chance agreement is already perfect.

A conflict is a pair whose current labels disagree and that has no adjudication yet.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from db.base import MAX_LABEL, MIN_LABEL

if TYPE_CHECKING:
    from db.base import CandidateRecord
    from db.store import Store

GRADES = list(range(MIN_LABEL, MAX_LABEL + 1))
Labels = Mapping[int, Mapping[str, int]]  # candidate id -> {annotator: grade}, as Store.current_labels


@dataclass(frozen=True)
class PairAgreement:
    """Cohen's kappa of two annotators over the ``items`` pairs both judged."""

    annotator_a: str
    annotator_b: str
    items: int
    kappa: float | None
    weighted_kappa: float | None  # quadratic weights over grades 0..4


@dataclass(frozen=True)
class Conflict:
    """A pair whose annotators disagree, with what the review view shows."""

    candidate_id: int
    qid: str
    doc_id: str
    question: str
    candidate: str
    labels: dict[str, int]  # annotator -> current grade
    gold_label: int | None


@dataclass
class AgreementReport:
    annotators: list[str]
    items_with_overlap: int  # pairs judged by two or more annotators
    pairs: list[PairAgreement] = field(default_factory=list)
    alpha: float | None = None
    conflicts: list[Conflict] = field(default_factory=list)


def pairwise_kappa(labels: Labels) -> list[PairAgreement]:
    """Cohen's kappa for every annotator pair that judged at least one pair in common."""
    annotators = sorted({name for judged in labels.values() for name in judged})
    result = []
    for a, b in itertools.combinations(annotators, 2):
        common = [judged for judged in labels.values() if a in judged and b in judged]
        if not common:
            continue
        y_a, y_b = [judged[a] for judged in common], [judged[b] for judged in common]
        result.append(PairAgreement(a, b, len(common), _kappa(y_a, y_b, None), _kappa(y_a, y_b, "quadratic")))
    return result


def krippendorff_alpha(labels: Labels, level: str = "ordinal") -> float | None:
    """Krippendorff's alpha over every annotator (``level``: nominal, ordinal, interval, ratio)."""
    import krippendorff  # imported on use: processes that only label need not load it

    annotators = sorted({name for judged in labels.values() for name in judged})
    units = [judged for judged in labels.values() if len(judged) >= 2]
    values = {grade for judged in units for grade in judged.values()}
    if not units or len(values) < 2:
        return None
    matrix = np.full((len(annotators), len(units)), np.nan)
    row = {name: i for i, name in enumerate(annotators)}
    for column, judged in enumerate(units):
        for name, grade in judged.items():
            matrix[row[name], column] = grade
    return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level, value_domain=GRADES))


def conflicting_ids(labels: Labels, adjudicated: Collection[int] = ()) -> list[int]:
    """Candidate ids whose current labels disagree and that have no adjudication, in id order."""
    return sorted(
        candidate_id
        for candidate_id, judged in labels.items()
        if len(set(judged.values())) > 1 and candidate_id not in adjudicated
    )


def conflict_list(labels: Labels, adjudicated: Collection[int], records: Iterable[CandidateRecord]) -> list[Conflict]:
    """``conflicting_ids`` with the texts and grades a review view shows (``records``: the
    dataset's ``Store.candidate_rows``)."""
    ids = conflicting_ids(labels, adjudicated)
    if not ids:
        return []
    by_id = {r.candidate_id: r for r in records}
    return [
        Conflict(
            candidate_id=i,
            qid=by_id[i].qid,
            doc_id=by_id[i].doc_id,
            question=by_id[i].question,
            candidate=by_id[i].candidate,
            labels=dict(sorted(labels[i].items())),
            gold_label=by_id[i].gold_label,
        )
        for i in ids
    ]


def conflicts(store: Store, dataset: str) -> list[Conflict]:
    """The review view's list: un-adjudicated pairs of ``dataset`` whose annotators disagree."""
    labels = store.current_labels(dataset)
    adjudicated = store.adjudications(dataset)
    return conflict_list(labels, adjudicated, store.candidate_rows(dataset)) if conflicting_ids(labels, adjudicated) else []


def agreement_report(store: Store, dataset: str, level: str = "ordinal") -> AgreementReport:
    """Kappa per annotator pair, alpha and the open conflicts of ``dataset``'s current labels."""
    labels = store.current_labels(dataset)
    return AgreementReport(
        annotators=sorted({name for judged in labels.values() for name in judged}),
        items_with_overlap=sum(len(judged) >= 2 for judged in labels.values()),
        pairs=pairwise_kappa(labels),
        alpha=krippendorff_alpha(labels, level),
        conflicts=conflicts(store, dataset),
    )


def _kappa(y_a: list[int], y_b: list[int], weights: str | None) -> float | None:
    from sklearn.metrics import cohen_kappa_score  # imported on use: scikit-learn takes seconds to load

    with warnings.catch_warnings():
        # Undefined kappa (one shared grade) warns and returns NaN; we report None instead.
        warnings.simplefilter("ignore")
        value = float(cohen_kappa_score(y_a, y_b, labels=GRADES, weights=weights))
    return None if math.isnan(value) else value

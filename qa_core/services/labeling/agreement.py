"""Agreement between annotators over their current labels, and the conflicts a reviewer settles.

- Cohen's kappa per annotator pair (scikit-learn), over the pairs both judged: unweighted, and
  quadratic-weighted, because grades 0..4 are ordinal (3 vs 4 is a smaller disagreement than 0 vs
  4). Both use the full grade scale 0..4 as categories, so the weights are distances between
  grades, not between the grades that happen to occur. For binary labels the two coincide.
- Krippendorff's alpha (the ``krippendorff`` package) over all annotators at once, ordinal level
  by default; it copes with missing judgements, so every pair judged twice or more counts.

A coefficient is ``None`` when it is undefined: no pair judged by both (or by two annotators), or
no variation at all (every judgement the same grade), where chance agreement is already perfect.

Every coefficient comes with the number of shared pairs it rests on and a 95% bootstrap
confidence interval (scipy's ``bootstrap``, percentile method, resampling the shared pairs;
resamples where the coefficient is undefined are left out). Below ``MIN_SHARED_PAIRS`` shared
pairs the report says "not enough overlap" (``enough`` is false) instead of letting a number over
one or two pairs pass for agreement: with 10 pairs a kappa's interval is still typically 0.5 wide.

A conflict is a pair whose current labels disagree and that has no adjudication yet.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from db.base import MAX_LABEL, MIN_LABEL

if TYPE_CHECKING:
    from db.base import CandidateRecord
    from db.store import Store

GRADES = list(range(MIN_LABEL, MAX_LABEL + 1))
Labels = Mapping[int, Mapping[str, int]]  # candidate id -> {annotator: grade}, as LabelStore.current_labels


MIN_SHARED_PAIRS = 10  # below this many shared pairs a coefficient is reported as "not enough overlap"
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 400  # scikit-learn's kappa costs ~2 ms a call: ~1 s per annotator pair
NOT_ENOUGH = "not enough overlap"


@dataclass(frozen=True)
class Interval:
    """A bootstrap confidence interval; ``None`` bounds when too few resamples were defined."""

    low: float | None
    high: float | None

    def __str__(self) -> str:
        return "—" if self.low is None or self.high is None else f"[{self.low:.2f}, {self.high:.2f}]"


NO_INTERVAL = Interval(None, None)


@dataclass(frozen=True)
class PairAgreement:
    """Cohen's kappa of two annotators over the ``items`` pairs both judged."""

    annotator_a: str
    annotator_b: str
    items: int
    kappa: float | None
    weighted_kappa: float | None  # quadratic weights over grades 0..4
    weighted_kappa_ci: Interval = NO_INTERVAL

    @property
    def enough(self) -> bool:
        """Whether enough pairs are shared for the coefficient to mean something."""
        return self.items >= MIN_SHARED_PAIRS


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
    alpha_ci: Interval = NO_INTERVAL
    judged: int = 0  # pairs judged by anyone

    @property
    def enough(self) -> bool:
        """Whether alpha rests on enough pairs judged twice or more to mean something."""
        return self.items_with_overlap >= MIN_SHARED_PAIRS

    @property
    def overlap_share(self) -> float | None:
        """Share of judged pairs that two or more annotators judged (``None``: nothing judged)."""
        return self.items_with_overlap / self.judged if self.judged else None


def pairwise_kappa(labels: Labels, *, intervals: bool = False, seed: int = 0) -> list[PairAgreement]:
    """Cohen's kappa for every annotator pair that judged at least one pair in common; with
    ``intervals``, the weighted kappa's bootstrap confidence interval too."""
    annotators = sorted({name for judged in labels.values() for name in judged})
    result = []
    for a, b in itertools.combinations(annotators, 2):
        common = [judged for judged in labels.values() if a in judged and b in judged]
        if not common:
            continue
        y_a, y_b = [judged[a] for judged in common], [judged[b] for judged in common]
        ci = _bootstrap((np.array(y_a), np.array(y_b)), _weighted_kappa, seed) if intervals else NO_INTERVAL
        result.append(PairAgreement(a, b, len(common), cohen_kappa(y_a, y_b, None), cohen_kappa(y_a, y_b, "quadratic"), ci))
    return result


def krippendorff_alpha(labels: Labels, level: str = "ordinal") -> float | None:
    """Krippendorff's alpha over every annotator (``level``: nominal, ordinal, interval, ratio)."""
    matrix = _reliability_matrix(labels)
    return None if matrix is None else _alpha(matrix, level)


def krippendorff_alpha_interval(labels: Labels, level: str = "ordinal", seed: int = 0) -> Interval:
    """Bootstrap confidence interval of ``krippendorff_alpha``, resampling the pairs judged twice."""
    matrix = _reliability_matrix(labels, varied=False)
    if matrix is None:
        return NO_INTERVAL
    return _bootstrap((np.arange(matrix.shape[1]),), lambda columns: _alpha(matrix[:, columns], level), seed)


def _reliability_matrix(labels: Labels, varied: bool = True) -> np.ndarray | None:
    """Annotators x pairs judged twice or more (NaN: not judged); ``None`` when there is no such
    pair or (``varied``) every judgement is the same grade."""
    annotators = sorted({name for judged in labels.values() for name in judged})
    units = [judged for judged in labels.values() if len(judged) >= 2]
    values = {grade for judged in units for grade in judged.values()}
    if not units or (varied and len(values) < 2):
        return None
    matrix = np.full((len(annotators), len(units)), np.nan)
    row = {name: i for i, name in enumerate(annotators)}
    for column, judged in enumerate(units):
        for name, grade in judged.items():
            matrix[row[name], column] = grade
    return matrix


def _alpha(matrix: np.ndarray, level: str) -> float | None:
    import krippendorff  # imported on use: processes that only label need not load it

    values = np.unique(matrix[~np.isnan(matrix)])
    if len(values) < 2:
        return None  # no variation: undefined
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
    dataset's ``DatasetStore.candidate_rows``)."""
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
    labels = store.labels.current_labels(dataset)
    adjudicated = store.labels.adjudications(dataset)
    return conflict_list(labels, adjudicated, store.datasets.candidate_rows(dataset)) if conflicting_ids(labels, adjudicated) else []


def agreement_report(
    store: Store, dataset: str, level: str = "ordinal", *, intervals: bool = True, seed: int = 0
) -> AgreementReport:
    """Kappa per annotator pair, alpha (with bootstrap intervals unless ``intervals`` is false)
    and the open conflicts of ``dataset``'s current labels."""
    return report_from_labels(store.labels.current_labels(dataset), level, intervals=intervals, seed=seed, conflicts=conflicts(store, dataset))


def report_from_labels(
    labels: Labels, level: str = "ordinal", *, intervals: bool = True, seed: int = 0, conflicts: Sequence[Conflict] = ()
) -> AgreementReport:
    """``agreement_report`` over labels already read (``{candidate_id: {annotator: grade}}``)."""
    return AgreementReport(
        annotators=sorted({name for judged in labels.values() for name in judged}),
        items_with_overlap=sum(len(judged) >= 2 for judged in labels.values()),
        pairs=pairwise_kappa(labels, intervals=intervals, seed=seed),
        alpha=krippendorff_alpha(labels, level),
        conflicts=list(conflicts),
        alpha_ci=krippendorff_alpha_interval(labels, level, seed) if intervals else NO_INTERVAL,
        judged=len(labels),
    )


def kappa_with_interval(y_a: Sequence[int], y_b: Sequence[int], seed: int = 0) -> tuple[float | None, Interval]:
    """Unweighted Cohen's kappa of two graders' judgements of the same pairs, with its bootstrap interval."""

    def kappa(a: np.ndarray, b: np.ndarray) -> float | None:
        return cohen_kappa(list(a), list(b), None)

    return cohen_kappa(y_a, y_b, None), _bootstrap((np.array(y_a), np.array(y_b)), kappa, seed)


def _weighted_kappa(y_a: np.ndarray, y_b: np.ndarray) -> float:
    value = cohen_kappa(list(y_a), list(y_b), "quadratic")
    return math.nan if value is None else value


def _bootstrap(data: tuple[np.ndarray, ...], statistic: Callable[..., float | None], seed: int) -> Interval:
    """Percentile bootstrap interval of ``statistic`` over the paired samples ``data``, leaving
    out resamples where it is undefined (``None``/NaN); no interval from a single pair or when
    fewer than half the resamples are defined."""
    from scipy.stats import bootstrap  # imported on use, as scikit-learn

    if len(data[0]) < 2:
        return NO_INTERVAL

    def defined(*sample: np.ndarray) -> float:
        value = statistic(*sample)
        return math.nan if value is None else value

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate or NaN-holding distributions warn; handled below
        result = bootstrap(
            data, defined, paired=True, vectorized=False, n_resamples=BOOTSTRAP_RESAMPLES,
            method="percentile", confidence_level=CONFIDENCE, rng=np.random.default_rng(seed),
        )
    distribution = result.bootstrap_distribution[~np.isnan(result.bootstrap_distribution)]
    if len(distribution) < BOOTSTRAP_RESAMPLES / 2:
        return NO_INTERVAL
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(distribution, [tail, 100 - tail])
    return Interval(float(low), float(high))


def cohen_kappa(y_a: Sequence[int], y_b: Sequence[int], weights: str | None) -> float | None:
    """scikit-learn's Cohen's kappa of two graders over grades 0..4 as categories (``weights``:
    ``None`` or ``"quadratic"``); ``None`` where it is undefined (chance agreement is perfect)."""
    from sklearn.metrics import cohen_kappa_score  # imported on use: scikit-learn takes seconds to load

    with warnings.catch_warnings():
        # Undefined kappa (one shared grade) warns and returns NaN; we report None instead.
        warnings.simplefilter("ignore")
        value = float(cohen_kappa_score(y_a, y_b, labels=GRADES, weights=weights))
    return None if math.isnan(value) else value

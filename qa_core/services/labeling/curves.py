"""Learning curves: MAP against the number of labels, for the simulated annotator and the real one.

``simulate_loop`` is the active-learning loop of issue 7 over a store: a seed set of labels, then
rounds that order the unlabelled TRAIN pairs with the Label page's queue strategies
(``order_candidates``), write the first pairs' gold grades into the store as annotator
``simulated`` (``LabelStore.add_label``, the label table with history that the Label page writes),
read the training labels back through ``training_dataset`` (the documented rule), retrain from
scratch and evaluate on the gold DEV and TEST labels. Model selection uses DEV only; TEST is
reported, never looked at by the loop.

The simulated annotator writes with ``add_label`` rather than through a ``LabelingSession``:
one annotator needs no leases, and a lease round trip costs ~25 ms a pair against ~1 ms, which
over the ~50,000 judgements of the benchmark is the difference between minutes and an hour.

``curve_summary`` turns curves over seeds into mean ± std per label budget, ``labels_to_reach``
reads off the labels a curve needs for a MAP target, and ``curve_figure`` draws curves with
plotly (the registry's versions are drawn by ``viz.version_curve_figure`` from the Train page's
versions table).
"""

from __future__ import annotations

import statistics
import tempfile
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from qa_core.services.labeling.strategies import STRATEGIES, Scores, TextRecord, model_scores, order_candidates
from qa_core.services.labeling.training_labels import training_dataset
from qa_core.types import InputError

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from db.base import CandidateRecord
    from db.store import Store
    from qa_core.rankers.base import Ranker

ANNOTATOR = "simulated"


@dataclass(frozen=True)
class CurvePoint:
    """One retraining: the TRAIN labels it saw and the MAP it reached."""

    labels: int
    dev_map: float
    test_map: float | None
    train_seconds: float


def seed_order(records: Sequence[TextRecord], seed: int) -> list[int]:
    """Candidate ids question by question, questions in seeded random order: a seed set cut from
    its start holds whole questions (as a person who starts by judging a few questions fully),
    only the last one possibly cut."""
    by_question: dict[str, list[int]] = defaultdict(list)
    for record in records:
        by_question[record.qid].append(record.candidate_id)
    qids = list(by_question)
    order = np.random.default_rng(seed).permutation(len(qids))
    return [candidate_id for i in order for candidate_id in by_question[qids[i]]]


def pick_round(
    strategy: str,
    unlabelled: Sequence[TextRecord],
    size: int,
    *,
    seed: int,
    scores: Mapping[str, Scores] | None = None,
) -> list[int]:
    """The ``size`` unlabelled pairs ``strategy`` puts first (the Label page's queue order)."""
    return order_candidates(strategy, unlabelled, seed=seed, scores=scores)[:size]


def strategy_scores(
    strategy: str, ranker: Ranker, unlabelled: Sequence[TextRecord], committee: Mapping[str, Scores]
) -> dict[str, Scores]:
    """The scores a strategy reads: the current model's for uncertainty; the current model's and
    the ``committee``'s (fixed models, e.g. BM25) for disagreement; none otherwise."""
    if strategy not in ("uncertainty", "disagreement"):
        return {}
    current = {"current": model_scores(ranker, unlabelled)}
    if strategy == "uncertainty":
        return current
    if not committee:
        raise InputError("the disagreement strategy needs at least one committee model besides the current one")
    return {**current, **committee}


def simulate_loop(
    store: Store,
    dataset: str,
    strategy: str,
    budgets: Sequence[int],
    *,
    seed: int = 1,
    model: str = "smcnn",
    model_config: Mapping[str, Any] | None = None,
    committee: Mapping[str, Scores] | None = None,
    train_split: str = "train",
    dev_split: str = "dev",
    test_split: str | None = "test",
    checkpoint_dir: Path | None = None,
    on_point: Callable[[CurvePoint], None] | None = None,
) -> list[CurvePoint]:
    """Run the loop on ``dataset`` (already in ``store``, with no labels on its TRAIN pairs) and
    return one point per budget.

    ``budgets``: cumulative TRAIN label counts, increasing; the first is the seed set (whole
    questions in seeded random order), each later one adds the pairs ``strategy`` puts first
    among the unlabelled ones. Training labels come from the store by the documented rule, with
    gold labels only on ``dev_split`` (model selection); ``test_split`` gold is for reporting.
    """
    from qa_core.services.experiments import evaluate_ranker, train_ranker

    records = _simulated_pairs(store, dataset, strategy, budgets, committee, train_split)
    gold = {r.candidate_id: r.gold_label for r in records}
    test = store.datasets.load_dataset(dataset, split=test_split).questions if test_split else []
    labelled: set[int] = set()
    points: list[CurvePoint] = []
    ranker: Ranker | None = None
    with tempfile.TemporaryDirectory() as scratch:
        folder = checkpoint_dir or Path(scratch)
        for round_number, budget in enumerate(budgets):
            unlabelled = [r for r in records if r.candidate_id not in labelled]
            wanted = budget - len(labelled)
            if ranker is None:
                picked = seed_order(unlabelled, seed)[:wanted]
            else:
                scores = strategy_scores(strategy, ranker, unlabelled, committee or {})
                picked = pick_round(strategy, unlabelled, wanted, seed=seed * 1000 + round_number, scores=scores)
            for candidate_id in picked:
                store.labels.add_label(candidate_id, ANNOTATOR, int(gold[candidate_id]))
            labelled.update(picked)
            data, _ = training_dataset(store, dataset, gold={dev_split})
            outcome = train_ranker(model, data, seed=seed, train_split=train_split, dev_split=dev_split, progress=False,
                                   checkpoint=folder / f"{model}-{strategy}-seed{seed}-round{round_number}.pt",
                                   model_config=dict(model_config or {}))
            ranker = outcome.ranker
            point = CurvePoint(
                labels=sum(c.label is not None for q in data.split(train_split) for c in q.candidates),
                dev_map=float(outcome.metrics["dev_map"]),
                test_map=float(evaluate_ranker(ranker, test).aggregate["map"]) if test else None,
                train_seconds=float(outcome.report.get("seconds") or 0.0),
            )
            points.append(point)
            if on_point is not None:
                on_point(point)
    return points


def _simulated_pairs(store: Store, dataset: str, strategy: str, budgets: Sequence[int],
                     committee: Mapping[str, Scores] | None, train_split: str) -> list[CandidateRecord]:
    """The TRAIN pairs the simulated annotator labels, once the simulation's settings are checked
    (``InputError`` saying which is wrong)."""
    if strategy not in STRATEGIES:
        raise InputError(f"unknown queue order {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if strategy == "disagreement" and not committee:
        raise InputError("the disagreement strategy needs at least one committee model besides the current one")
    if list(budgets) != sorted(set(budgets)) or not budgets or budgets[0] <= 0:
        raise InputError(f"budgets must be positive and strictly increasing, got {list(budgets)}")
    records = store.datasets.candidate_rows(dataset, split=train_split)
    if budgets[-1] > len(records):
        raise InputError(f"budget {budgets[-1]} exceeds the {len(records)} pairs of split {train_split!r}")
    if any(r.gold_label is None for r in records):
        raise InputError(f"the simulated annotator needs gold labels on every {train_split!r} pair")
    return records


# ---------------------------------------------------------------------- reading curves


def curve_summary(curves: Sequence[Sequence[CurvePoint]], metric: str = "test_map") -> list[dict[str, float]]:
    """Mean and std of ``metric`` over seeds at each label budget: ``[{labels, mean, std, n}]``."""
    by_labels: dict[int, list[float]] = defaultdict(list)
    for curve in curves:
        for point in curve:
            value = getattr(point, metric)
            if value is not None:
                by_labels[point.labels].append(float(value))
    return [
        {
            "labels": labels,
            "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "n": len(values),
        }
        for labels, values in sorted(by_labels.items())
    ]


def labels_to_reach(summary: Sequence[Mapping[str, float]], target: float) -> int | None:
    """The smallest measured label budget whose mean reaches ``target``; ``None`` if none does.
    A coarse answer by design: the curve is only known at its budgets."""
    for row in summary:
        if row["mean"] >= target:
            return int(row["labels"])
    return None


def curve_figure(
    series: Mapping[str, Sequence[Mapping[str, float]]],
    *,
    title: str = "MAP against labels",
    y_title: str = "MAP",
    references: Mapping[str, float] | None = None,
) -> go.Figure:
    """One line per series (``curve_summary`` rows: labels, mean, std), std as error bars, and
    horizontal reference lines (e.g. the full-data MAP and 95% of it)."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for name, rows in series.items():
        figure.add_trace(
            go.Scatter(
                x=[row["labels"] for row in rows],
                y=[row["mean"] for row in rows],
                error_y={"type": "data", "array": [row.get("std", 0.0) for row in rows], "visible": True},
                mode="lines+markers",
                name=name,
            )
        )
    for name, value in (references or {}).items():
        figure.add_hline(y=value, line_dash="dot", annotation_text=name, annotation_position="bottom right")
    figure.update_layout(title=title, xaxis_title="labels (TRAIN pairs)", yaxis_title=y_title, template="plotly_white")
    return figure

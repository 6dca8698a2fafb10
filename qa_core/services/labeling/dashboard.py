"""The agreement dashboard of the Label page: tables the page draws and exports, without Streamlit.

- **Kappa per annotator pair** and **Krippendorff's alpha**: ``agreement`` (scikit-learn, the
  ``krippendorff`` package), with shared-pair counts and bootstrap intervals.
- **Bias per annotator**: the mean of (annotator's grade - the pair's consensus) over the pairs
  judged by two or more, where the consensus is the reviewer's adjudication when there is one,
  else the median of every annotator's current grade of the pair (the annotator's own included,
  so two annotators who differ by 2 get +1 and -1). Positive: grades more generously than the rest.
- **Disagreement per question class**: over pairs judged by two or more, the share whose grades
  are not all equal, per coarse question class (``QuestionAnalyzer``: the store's class CNN, else
  the wh-word rules).
- **Calibration against gold per annotator** (``calibration``): exact agreement and weighted
  kappa of each annotator's calibration judgements with gold, apart from the agreement between
  annotators (calibration judgements are not labels).
- **Seconds per judgement per annotator**: from the pair being shown (its queue claim) to the
  label (``AnnotationStore.judgement_times``); median, mean and 90th percentile, because one pair left on
  screen over lunch would make a mean meaningless on its own.

Every table is a pandas DataFrame; ``dashboard_csv`` joins them into one long CSV.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from qa_core.services.labeling.agreement import NOT_ENOUGH, AgreementReport, Labels, report_from_labels
from qa_core.services.labeling.calibration import binary_gold, calibration_records, results_table

if TYPE_CHECKING:
    from db.annotation import JudgementTime
    from db.store import Store
    from qa_core.classifiers.analysis import QuestionAnalyzer

NO_CLASS = "(no class)"


@dataclass
class Dashboard:
    report: AgreementReport
    kappas: pd.DataFrame
    bias: pd.DataFrame
    by_class: pd.DataFrame
    timing: pd.DataFrame
    # Each annotator's calibration against gold (``calibration.results_table``); apart from the rest:
    # calibration judgements are not labels and never enter the agreement between annotators.
    calibration: pd.DataFrame = field(default_factory=pd.DataFrame)


def consensus(labels: Labels, adjudicated: Mapping[int, int] | None = None) -> dict[int, float]:
    """``{candidate_id: consensus grade}`` of the pairs judged by two or more (see the module)."""
    adjudicated = adjudicated or {}
    return {
        candidate_id: float(adjudicated.get(candidate_id, np.median(list(judged.values()))))
        for candidate_id, judged in labels.items()
        if len(judged) >= 2
    }


def annotator_bias(labels: Labels, adjudicated: Mapping[int, int] | None = None) -> pd.DataFrame:
    """Per annotator with a current label: pairs judged with others, mean grade there, and bias
    against the consensus (both empty for one who shares no pair: listed all the same, so that the
    table names everyone the dashboard counts)."""
    agreed = consensus(labels, adjudicated)
    rows: dict[str, list[tuple[int, float]]] = {name: [] for judged in labels.values() for name in judged}
    for candidate_id, value in agreed.items():
        for name, grade in labels[candidate_id].items():
            rows[name].append((grade, grade - value))
    return pd.DataFrame(
        [
            {
                "annotator": name,
                "shared pairs": len(pairs),
                "mean grade": float(np.mean([g for g, _ in pairs])) if pairs else None,
                "bias": float(np.mean([d for _, d in pairs])) if pairs else None,
            }
            for name, pairs in sorted(rows.items())
        ],
        columns=["annotator", "shared pairs", "mean grade", "bias"],
    )


def disagreement_by_class(labels: Labels, classes: Mapping[int, str | None]) -> pd.DataFrame:
    """Per question class: pairs judged by two or more, how many of them disagree, and the rate.
    ``classes`` maps candidate ids to their question's class (``None``: no class)."""
    counts: dict[str, list[int]] = {}
    for candidate_id, judged in labels.items():
        if len(judged) < 2:
            continue
        tally = counts.setdefault(classes.get(candidate_id) or NO_CLASS, [0, 0])
        tally[0] += 1
        tally[1] += len(set(judged.values())) > 1
    return pd.DataFrame(
        [
            {"question class": name, "shared pairs": n, "disagreements": d, "disagreement rate": d / n}
            for name, (n, d) in sorted(counts.items())
        ],
        columns=["question class", "shared pairs", "disagreements", "disagreement rate"],
    )


def seconds_per_judgement(times: Iterable[JudgementTime], annotators: Iterable[str] = ()) -> pd.DataFrame:
    """Per annotator: judgements timed, and the median, mean and 90th percentile of their seconds;
    each of ``annotators`` listed, with 0 judgements where none was timed (their labels came from
    elsewhere than the queue: an import, Ask or Compare)."""
    frame = pd.DataFrame([(t.annotator, t.seconds) for t in times], columns=["annotator", "seconds"])
    frame = frame.astype({"seconds": float})  # an empty frame's column is of objects, which have no quantile
    columns = ["annotator", "judgements", "median s", "mean s", "p90 s"]
    grouped = frame.groupby("annotator")["seconds"]
    table = pd.DataFrame(
        {
            "judgements": grouped.size(),
            "median s": grouped.median(),
            "mean s": grouped.mean(),
            "p90 s": grouped.quantile(0.9),
        }
    )
    everyone = sorted(set(table.index) | set(annotators))
    table = table.reindex(pd.Index(everyone, name="annotator")).fillna({"judgements": 0})
    return table.astype({"judgements": int}).reset_index()[columns]


def kappa_table(report: AgreementReport) -> pd.DataFrame:
    """Kappa per annotator pair; coefficients over too few shared pairs are left empty."""
    return pd.DataFrame(
        [
            {
                "annotator": p.annotator_a,
                "other annotator": p.annotator_b,
                "pairs both judged": p.items,
                "Cohen's κ": p.kappa if p.enough else None,
                "weighted κ": p.weighted_kappa if p.enough else None,
                "weighted κ low": p.weighted_kappa_ci.low if p.enough else None,
                "weighted κ high": p.weighted_kappa_ci.high if p.enough else None,
                "note": "" if p.enough else NOT_ENOUGH,
            }
            for p in report.pairs
        ],
        columns=[
            "annotator", "other annotator", "pairs both judged", "Cohen's κ", "weighted κ", "weighted κ low",
            "weighted κ high", "note",
        ],
    )


def build_dashboard(
    labels: Labels,
    *,
    adjudicated: Mapping[int, int] | None = None,
    classes: Mapping[int, str | None] | None = None,
    times: Iterable[JudgementTime] = (),
    seed: int = 0,
) -> Dashboard:
    """Every table of the dashboard from labels and facts already read (pure: tests build it by hand)."""
    report = report_from_labels(labels, seed=seed)
    return Dashboard(
        report=report,
        kappas=kappa_table(report),
        bias=annotator_bias(labels, adjudicated),
        by_class=disagreement_by_class(labels, classes or {}),
        timing=seconds_per_judgement(times, report.annotators),
    )


def annotators_line(dashboard: Dashboard, named: int = 3) -> str:
    """What the dashboard's annotator count counts, and who of them the agreement leaves out (the
    per-annotator tables list everyone counted; the κ table, the annotators who share a pair),
    naming at most ``named`` of those."""
    alone = dashboard.bias.loc[dashboard.bias["shared pairs"] == 0, "annotator"].tolist()
    line = "everyone with a current label in this dataset"
    if alone:
        names = ", ".join(alone[:named]) + (f" and {len(alone) - named} more" if len(alone) > named else "")
        line += f"; {names} {'shares' if len(alone) == 1 else 'share'} no pair with another (no κ, no bias)"
    return line


def dashboard_stamp(store: Store, dataset: str) -> str:
    """What changes when the dashboard would (labels, adjudications, timed and calibration
    judgements): a cache key, far cheaper than the bootstrap (about a second per annotator pair)."""
    return json.dumps(
        [store.labels.current_labels(dataset), sorted(store.labels.adjudications(dataset)), len(store.annotation.judgement_times(dataset)),
         len(store.calibration.calibration_judgements(dataset))],
        sort_keys=True,
    )


def store_dashboard(store: Store, dataset: str, analyzer: QuestionAnalyzer) -> Dashboard:
    """``build_dashboard`` over the store's current labels, adjudications and judgement times."""
    labels = store.labels.current_labels(dataset)
    records = [r for r in store.datasets.candidate_rows(dataset) if r.candidate_id in labels]
    texts = sorted({r.question for r in records})
    analysed = dict(zip(texts, analyzer.analyse_many(texts))) if texts else {}
    board = build_dashboard(
        labels,
        adjudicated={c: a["value"] for c, a in store.labels.adjudications(dataset).items()},
        classes={r.candidate_id: analysed[r.question].qclass for r in records},
        times=store.annotation.judgement_times(dataset),
    )
    board.calibration = results_table(
        store.calibration.calibration_judgements(dataset), binary_gold(calibration_records(store, dataset))
    )
    return board


def dashboard_csv(dashboard: Dashboard) -> str:
    """One CSV of every table: a ``table`` column names the table, the rest are its columns."""
    report = dashboard.report
    summary = pd.DataFrame(
        [
            {"annotators": len(report.annotators), "pairs judged": report.judged,
             "pairs judged by two or more": report.items_with_overlap,
             "Krippendorff's alpha (ordinal)": report.alpha if report.enough else None,
             "alpha low": report.alpha_ci.low if report.enough else None,
             "alpha high": report.alpha_ci.high if report.enough else None,
             "note": "" if report.enough else NOT_ENOUGH}
        ]
    )
    tables = {
        "summary": summary,
        "kappa per annotator pair": dashboard.kappas,
        "bias per annotator": dashboard.bias,
        "disagreement per question class": dashboard.by_class,
        "seconds per judgement": dashboard.timing,
        "calibration against gold": dashboard.calibration,
    }
    frame = pd.concat(
        [table.assign(table=name) for name, table in tables.items() if not table.empty], ignore_index=True
    )
    return frame[["table", *[c for c in frame.columns if c != "table"]]].to_csv(index=False)

"""The agreement dashboard's numbers against hand-computed ones (pure), its CSV, its charts, and
the dashboard over a real store."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from db.annotation import JudgementTime
from db.store import Store
from qa_core.classifiers.analysis import QuestionAnalyzer
from qa_core.services.labeling import LabelingSession, queue_policy
from qa_core.services.labeling.charts import dashboard_figures
from qa_core.services.labeling.dashboard import build_dashboard, dashboard_csv, store_dashboard
from qa_core.types import Candidate, Dataset, Question

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LABELS = {
    1: {"a": 0, "b": 0},  # consensus 0
    2: {"a": 1, "b": 3},  # median 2: a -1, b +1
    3: {"a": 2, "b": 2, "c": 4},  # median 2: c +2
    4: {"a": 4},  # judged once: no consensus, no bias
    5: {"a": 3, "b": 1},  # adjudicated to 1: a +2, b 0
}
CLASSES = {1: "HUM", 2: "HUM", 3: "LOC", 4: "LOC", 5: None}


def timed(label_id: int, annotator: str, seconds: float) -> JudgementTime:
    return JudgementTime(label_id, label_id, annotator, T0, T0 + timedelta(seconds=seconds))


TIMES = [timed(1, "a", 2), timed(2, "a", 4), timed(3, "a", 30), timed(4, "b", 3)]


def test_dashboard_numbers_against_hand_computed_ones() -> None:
    dashboard = build_dashboard(LABELS, adjudicated={5: 1}, classes=CLASSES, times=TIMES)
    bias = dashboard.bias.set_index("annotator")
    # a: (0 - 1 + 0 + 2) / 4; b: (0 + 1 + 0 + 0) / 4; c: +2 on its one shared pair.
    assert bias.loc["a"].tolist() == pytest.approx([4, 1.5, 0.25])
    assert bias.loc["b"].tolist() == pytest.approx([4, 1.5, 0.25])
    assert bias.loc["c"].tolist() == pytest.approx([1, 4.0, 2.0])

    by_class = dashboard.by_class.set_index("question class")
    assert by_class.loc["HUM"].tolist() == pytest.approx([2, 1, 0.5])  # pair 2 disagrees, pair 1 not
    assert by_class.loc["LOC"].tolist() == pytest.approx([1, 1, 1.0])  # pair 4 was judged once
    assert by_class.loc["(no class)"].tolist() == pytest.approx([1, 1, 1.0])

    timing = dashboard.timing.set_index("annotator")
    # a: 2, 4, 30 s: median 4, mean 12, p90 by linear interpolation 4 + 0.8 * 26 = 24.8.
    assert timing.loc["a"].tolist() == pytest.approx([3, 4.0, 12.0, 24.8])
    assert timing.loc["b"].tolist() == pytest.approx([1, 3.0, 3.0, 3.0])

    kappas = dashboard.kappas
    assert kappas[["annotator", "other annotator", "pairs both judged"]].values.tolist() == [
        ["a", "b", 4], ["a", "c", 1], ["b", "c", 1]
    ]
    assert set(kappas["note"]) == {"not enough overlap"} and kappas["weighted κ"].isna().all()


def test_dashboard_csv_holds_every_table_and_reads_back() -> None:
    dashboard = build_dashboard(LABELS, adjudicated={5: 1}, classes=CLASSES, times=TIMES)
    frame = pd.read_csv(io.StringIO(dashboard_csv(dashboard)))
    assert list(frame["table"].unique()) == [
        "summary", "kappa per annotator pair", "bias per annotator", "disagreement per question class",
        "seconds per judgement",
    ]
    summary = frame[frame["table"] == "summary"].iloc[0]
    assert (summary["pairs judged"], summary["pairs judged by two or more"], summary["note"]) == (5, 4, "not enough overlap")
    bias = frame[frame["table"] == "bias per annotator"].set_index("annotator")
    assert bias.loc["c", "bias"] == pytest.approx(2.0)


def test_charts_escape_names() -> None:
    labels = {1: {"<b>x</b>": 0, "y": 2}}
    figures = dashboard_figures(build_dashboard(labels, classes={1: "HUM"}, times=[timed(1, "<b>x</b>", 5)]))
    assert set(figures) == {"bias", "by_class", "timing"}
    names = [str(x) for figure in figures.values() for x in figure.data[0].x]
    assert "&lt;b&gt;x&lt;/b&gt;" in names and not any("<b>" in name for name in names)
    assert dashboard_figures(build_dashboard({})) == {}


def test_store_dashboard_reads_labels_adjudications_classes_and_times(store: Store) -> None:
    store.datasets.import_dataset(
        Dataset("dash", [
            Question("q1", "who wrote hamlet?", [Candidate("d0", "shakespeare"), Candidate("d1", "marlowe")]),
            Question("q2", "where is paris?", [Candidate("d0", "in france")]),
        ])
    )
    store.annotation.set_annotation_settings("dash", 1.0, 2, "lead")
    grades = {"ann": {"q1/d0": 3, "q1/d1": 0, "q2/d0": 4}, "bob": {"q1/d0": 2, "q1/d1": 0, "q2/d0": 4}}
    for name, mine in grades.items():
        session = LabelingSession.build(store, "dash", name, "random", holder=name, policy=queue_policy(store, "dash"))
        while (item := session.current()) is not None:
            session.label(item, mine[f"{item.record.qid}/{item.record.doc_id}"])
    dashboard = store_dashboard(store, "dash", QuestionAnalyzer())
    assert dashboard.report.items_with_overlap == 3
    assert dashboard.timing["judgements"].tolist() == [3, 3]
    assert (dashboard.timing["median s"] >= 0).all()
    by_class = dashboard.by_class.set_index("question class")
    assert by_class.loc["HUM", "disagreements"] == 1 and by_class.loc["LOC", "disagreements"] == 0

"""qa_core.evaluation against hand-computed trec_eval values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qa_core.evaluation import clean_qids, evaluate, qrels_from_questions, run_from_scores
from qa_core.types import Candidate, Question

LOG2_3 = math.log2(3)

# q1: ranking b(0) a(1) d(0) c(1); relevant at ranks 2 and 4
#   AP = (1/2 + 2/4) / 2 = 0.5; RR = 1/2; P@1 = 0
#   nDCG@10 = (1/log2(3) + 1/log2(5)) / (1/log2(2) + 1/log2(3)) = 1.061606 / 1.630930 = 0.650920
# q2: ranking x(1) y(0): every metric 1
# q3 (graded): ranking o(0) n(1) m(2); relevant (grade > 0) at ranks 2 and 3
#   AP = (1/2 + 2/3) / 2 = 7/12; RR = 1/2; P@1 = 0
#   nDCG@10 = (1/log2(3) + 2/log2(4)) / (2/log2(2) + 1/log2(3)) = 1.630930 / 2.630930 = 0.619907
QRELS = {
    "q1": {"a": 1, "b": 0, "c": 1, "d": 0},
    "q2": {"x": 1, "y": 0},
    "q3": {"m": 2, "n": 1, "o": 0},
}
RUN = {
    "q1": {"b": 0.9, "a": 0.8, "d": 0.5, "c": 0.1},
    "q2": {"x": 0.7, "y": 0.2},
    "q3": {"o": 3.0, "n": 2.0, "m": 1.0},
}
EXPECTED = {
    "q1": {"map": 0.5, "mrr": 0.5, "p@1": 0.0, "ndcg@10": (1 / LOG2_3 + 1 / math.log2(5)) / (1 + 1 / LOG2_3)},
    "q2": {"map": 1.0, "mrr": 1.0, "p@1": 1.0, "ndcg@10": 1.0},
    "q3": {"map": 7 / 12, "mrr": 0.5, "p@1": 0.0, "ndcg@10": (1 / LOG2_3 + 1.0) / (2 + 1 / LOG2_3)},
}


def test_per_query_and_aggregate_match_hand_computation() -> None:
    result = evaluate(RUN, QRELS)
    assert result.questions == 3 and result.clean is False
    assert list(result.per_query.columns) == ["map", "mrr", "p@1", "ndcg@10"]
    assert result.per_query.index.name == "qid"
    for qid, metrics in EXPECTED.items():
        for name, value in metrics.items():
            assert result.per_query.loc[qid, name] == pytest.approx(value, abs=1e-4), (qid, name)
    assert EXPECTED["q1"]["ndcg@10"] == pytest.approx(0.650920, abs=1e-6)
    assert EXPECTED["q3"]["ndcg@10"] == pytest.approx(0.619907, abs=1e-6)
    # MAP = (0.5 + 1 + 7/12) / 3 = 0.694444; MRR = (0.5 + 1 + 0.5) / 3; P@1 = 1/3
    assert result.aggregate["map"] == pytest.approx((0.5 + 1 + 7 / 12) / 3, abs=1e-4)
    assert result.aggregate["mrr"] == pytest.approx(2 / 3, abs=1e-4)
    assert result.aggregate["p@1"] == pytest.approx(1 / 3, abs=1e-4)
    assert set(result.aggregate) == {"map", "mrr", "p@1", "ndcg@10"}


def test_question_missing_from_run_counts_as_zero() -> None:
    qrels = {**QRELS, "q4": {"z": 1, "w": 0}}
    result = evaluate(RUN, qrels)  # q4 has no run entry: 0 on every metric (trec_eval -c)
    assert result.questions == 4
    assert result.per_query.loc["q4"].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert result.aggregate["map"] == pytest.approx((0.5 + 1 + 7 / 12 + 0) / 4, abs=1e-4)
    # an empty pool in the run is the same as no entry
    assert evaluate({**RUN, "q4": {}}, qrels).aggregate == result.aggregate


def test_run_questions_without_qrels_are_ignored() -> None:
    result = evaluate({**RUN, "extra": {"e": 1.0}}, QRELS)
    assert result.questions == 3 and "extra" not in result.per_query.index


def test_raw_keeps_degenerate_questions_clean_drops_them() -> None:
    qrels = {**QRELS, "none": {"u": 0, "v": 0}, "all": {"s": 1, "t": 1}}
    run = {**RUN, "none": {"u": 0.5, "v": 0.4}, "all": {"s": 0.5, "t": 0.4}}
    assert clean_qids(qrels) == ["q1", "q2", "q3"]

    raw = evaluate(run, qrels)
    assert raw.questions == 5
    # no relevant candidate: AP 0 (trec_eval); all relevant: AP 1
    assert raw.per_query.loc["none", "map"] == 0.0 and raw.per_query.loc["all", "map"] == 1.0
    assert raw.aggregate["map"] == pytest.approx((0.5 + 1 + 7 / 12 + 0 + 1) / 5, abs=1e-4)

    clean = evaluate(run, qrels, clean=True)
    assert clean.clean is True and clean.questions == 3
    assert list(clean.per_query.index) == ["q1", "q2", "q3"]
    assert clean.aggregate == pytest.approx(evaluate(RUN, QRELS).aggregate)


def test_ties_break_by_doc_id_descending_as_trec_eval() -> None:
    # Equal scores: trec_eval orders by doc id descending, so "b" (non-relevant) comes first:
    # AP = 1/2, RR = 1/2, P@1 = 0, nDCG@10 = (1/log2(3)) / 1
    result = evaluate({"q": {"a": 1.0, "b": 1.0}}, {"q": {"a": 1, "b": 0}})
    assert result.per_query.loc["q"].tolist() == pytest.approx([0.5, 0.5, 0.0, 1 / LOG2_3], abs=1e-4)
    # with the labels swapped the relevant "b" wins the tie
    swapped = evaluate({"q": {"a": 1.0, "b": 1.0}}, {"q": {"a": 0, "b": 1}})
    assert swapped.per_query.loc["q"].tolist() == pytest.approx([1.0, 1.0, 1.0, 1.0])


def test_no_questions_gives_nan() -> None:
    result = evaluate(RUN, {})
    assert result.questions == 0 and result.per_query.empty
    assert all(math.isnan(value) for value in result.aggregate.values())


def _questions() -> list[Question]:
    return [
        Question("q1", "question one", [Candidate("a", "A", label=1), Candidate("b", "B", label=0)]),
        Question("q2", "question two", [Candidate("c", "C", label=None), Candidate("d", "D", label=2)]),
        Question("q3", "unlabelled", [Candidate("e", "E")]),
    ]


def test_qrels_from_questions_keeps_labelled_candidates_only() -> None:
    assert qrels_from_questions(_questions()) == {"q1": {"a": 1, "b": 0}, "q2": {"d": 2}}


def test_run_from_scores_and_round_trip() -> None:
    questions = _questions()
    run = run_from_scores(questions, [np.array([0.2, 0.9]), np.array([0.1, 0.3]), np.array([5.0])])
    assert run == {"q1": {"a": 0.2, "b": 0.9}, "q2": {"c": 0.1, "d": 0.3}, "q3": {"e": 5.0}}
    assert all(isinstance(s, float) for pool in run.values() for s in pool.values())
    result = evaluate(run, qrels_from_questions(questions))
    # q1: b(0) then a(1) -> AP 1/2; q2: d is the only judged candidate -> AP 1
    assert result.per_query["map"].tolist() == pytest.approx([0.5, 1.0])
    with pytest.raises(ValueError):
        run_from_scores(questions, [np.array([0.2])] * 3)
    with pytest.raises(ValueError):
        run_from_scores(questions, [])

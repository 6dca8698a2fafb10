"""Error analysis: which questions a model gets wrong, and which kinds of question (slices).

Per question: AP, RR, P@1 and nDCG@10 from ``qa_core.evaluation`` (ir-measures, trec_eval
semantics), worst first. A candidate without a judgement counts as not relevant there (trec_eval's
rule); each row counts its unjudged candidates, and ``judgement_report`` gives judged@10 and the
measures that skip them (bpref, condensed lists). Slices group those values by

- question class: ``QuestionAnalyzer`` (the store's trained classifiers, else the wh-word rules);
- question length: words (tokens that are neither punctuation nor whitespace), in ``LENGTH_BUCKETS``;
- lexical overlap: the largest IDF-weighted overlap of the question with one of its CORRECT answers
  (``idf_overlap_nonstop`` of ``qa_core.text.features``: the share of the question's non-stopword
  IDF mass found in the answer; IDF over the evaluated questions' candidate sentences), in
  ``OVERLAP_BUCKETS``. A question without a correct answer has none ("no correct answer");
- label source: where the question's labels come from under the label rule chosen
  (``qa_core.services.evaluation_labels``; always "gold" under the gold rule): "adjudicated" when
  any of its candidates is adjudicated, else "labels" when any carries an annotator label, else "gold".

The expensive, label-free parts (the run, ``qa_core.services.experiments.score_questions``; question
profiles; candidate overlaps) are separate functions so that a page can cache them per model
version and dataset; labels are read per call.
No Streamlit here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from qa_core import ordering
from qa_core.evaluation import MEASURES, JudgementReport, TieReport, evaluate, judgements, tie_aware
from qa_core.services.experiments import score_questions
from qa_core.types import Question

if TYPE_CHECKING:
    from qa_core.classifiers.analysis import QuestionAnalyzer

Qrels = dict[str, dict[str, int]]

METRIC_COLUMNS = {name: str(measure) for name, measure in MEASURES.items()}  # map -> AP, as trec_eval names it per question
LENGTH_BUCKETS = ((5, "1-5 words"), (8, "6-8 words"), (12, "9-12 words"), (math.inf, "13+ words"))
OVERLAP_BUCKETS = ((0.25, "overlap < 0.25"), (0.5, "0.25-0.5"), (0.75, "0.5-0.75"), (math.inf, "≥ 0.75"))
NO_CORRECT_ANSWER = "no correct answer"
LABEL_SOURCES = ("gold", "preferences", "labels", "adjudicated")
SLICES = {
    "question class": "class",
    "question length": "length",
    "lexical overlap": "overlap_bucket",
    "label source": "label_source",
}
TABLE_COLUMNS = [
    "qid", "question", "split", *METRIC_COLUMNS.values(), "class", "words", "length", "overlap",
    "overlap_bucket", "label_source", "candidates", "tied", "unjudged", "correct",
]


def _bucket(value: float, buckets: Sequence[tuple[float, str]]) -> str:
    return next(name for upper, name in buckets if value <= upper)


def _overlap_bucket(value: float) -> str:
    if math.isnan(value):
        return NO_CORRECT_ANSWER
    return next(name for upper, name in OVERLAP_BUCKETS if value < upper)


def question_profiles(questions: Sequence[Question], analyzer: QuestionAnalyzer | None = None) -> pd.DataFrame:
    """Label-free facts per question (index qid): question, split, class, words, length bucket."""
    from qa_core.classifiers.analysis import QuestionAnalyzer
    from qa_core.text.nlp import parse_many

    parsed = parse_many([q.text for q in questions])
    analyses = (analyzer or QuestionAnalyzer()).analyse_many(parsed)
    words = [sum(1 for t, p in zip(p.tokens, p.is_punct) if t.strip() and not p) for p in parsed]
    return pd.DataFrame(
        {
            "question": [q.text for q in questions],
            "split": [q.split for q in questions],
            "class": [a.qclass or "none" for a in analyses],
            "words": words,
            "length": [_bucket(n, LENGTH_BUCKETS) for n in words],
        },
        index=pd.Index([q.qid for q in questions], name="qid", dtype=object),
    )


def candidate_overlaps(questions: Sequence[Question]) -> dict[str, dict[str, float]]:
    """``{qid: {doc_id: IDF-weighted overlap}}`` of each question with each of its candidates.

    IDF is fitted on the candidate sentences of ``questions`` (label-free; the documents a ranker
    sees), computed by the ``overlap`` baseline fitted on them."""
    from qa_core.rankers.baselines import WordOverlapRanker

    overlap = WordOverlapRanker()  # its score is exactly this overlap; fit learns only the IDF
    overlap.fit(questions, [], progress=False)
    return score_questions(overlap, questions)


def error_table(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    profiles: pd.DataFrame,
    overlaps: Mapping[str, Mapping[str, float]],
    label_sources: Mapping[str, str],
    clean: bool = False,
) -> pd.DataFrame:
    """One row per evaluated question (those of ``profiles`` with labels), worst first (AP, then
    RR, then qid), the questions without a correct candidate after all others: they score 0 under
    every model, and a worst-first list that opened with them would hide the questions a model could
    have got right (``unanswerable``). ``clean`` keeps only questions with a correct and a wrong
    candidate, as the WikiQA/TrecQA evaluations do; off (the default, as ``evaluate`` and every
    page), a question without a correct answer scores 0."""
    judged = _judged(qrels, profiles)
    result = evaluate({qid: run.get(qid, {}) for qid in judged}, judged, clean=clean)
    rows = []
    for qid, values in result.per_query.iterrows():
        grades = judged[qid]
        correct = [doc for doc, grade in grades.items() if grade > 0]
        pool = overlaps.get(qid, {})
        overlap = max((pool[doc] for doc in correct if doc in pool), default=float("nan"))
        profile = profiles.loc[qid]
        rows.append(
            {
                "qid": qid,
                "question": profile["question"],
                "split": profile["split"],
                **{column: float(values[metric]) for metric, column in METRIC_COLUMNS.items()},
                "class": profile["class"],
                "words": int(profile["words"]),
                "length": profile["length"],
                "overlap": overlap,
                "overlap_bucket": _overlap_bucket(overlap),
                "label_source": label_sources.get(qid, "gold"),
                "candidates": len(run.get(qid, {})),
                "tied": ordering.tied_count(list(run.get(qid, {}).values())),
                "unjudged": sum(doc not in grades for doc in run.get(qid, {})),
                "correct": len(correct),
            }
        )
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS).sort_values(["AP", "RR", "qid"], kind="stable")
    return pd.concat([table[~unanswerable(table)], table[unanswerable(table)]], ignore_index=True)


def unanswerable(table: pd.DataFrame) -> pd.Series:
    """The rows of ``error_table`` whose question has no correct candidate in its pool: no model can
    rank one first."""
    return table["correct"] == 0


def _judged(qrels: Mapping[str, Mapping[str, int]], profiles: pd.DataFrame) -> dict[str, Mapping[str, int]]:
    return {qid: grades for qid, grades in qrels.items() if qid in profiles.index}


def ties(
    run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, int]], profiles: pd.DataFrame,
    clean: bool = False,
) -> TieReport:
    """The tied scores of ``error_table``'s questions and what they decide (``evaluation.tie_aware``)."""
    judged = _judged(qrels, profiles)
    return tie_aware({qid: run.get(qid, {}) for qid in judged}, judged, clean=clean)


def judgement_report(
    run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, int]], profiles: pd.DataFrame,
    clean: bool = True,
) -> JudgementReport:
    """How much of ``error_table``'s questions' candidates is judged, and the measures that skip the
    unjudged ones (``evaluation.judgements``)."""
    judged = _judged(qrels, profiles)
    return judgements({qid: run.get(qid, {}) for qid in judged}, judged, clean=clean)


def slice_table(table: pd.DataFrame, by: str) -> pd.DataFrame:
    """Mean metrics per value of ``by`` (a ``SLICES`` name or a column), with the question count;
    buckets in their natural order, classes by name."""
    column = SLICES.get(by, by)
    if column not in table.columns:
        raise KeyError(f"no slice {by!r}; known: {', '.join(SLICES)}")
    order = {
        "length": [name for _, name in LENGTH_BUCKETS],
        "overlap_bucket": [name for _, name in OVERLAP_BUCKETS] + [NO_CORRECT_ANSWER],
        "label_source": list(LABEL_SOURCES),
    }.get(column)
    metrics = list(METRIC_COLUMNS.values())
    grouped = table.groupby(column, sort=True)[metrics].mean()
    grouped.insert(0, "questions", table.groupby(column, sort=True).size())
    if order is not None:
        grouped = grouped.reindex([name for name in order if name in grouped.index])
    return grouped.rename_axis(by).reset_index()

"""MAP, MRR, P@1 and nDCG@10 through ir-measures' pytrec_eval backend (trec_eval semantics).

Conventions, all from trec_eval:
- a candidate is relevant when its grade is > 0; nDCG uses the grade as gain;
- tied scores are ordered by doc_id descending (trec_eval's tie break), so ties are deterministic;
- questions of the qrels missing from the run score 0 on every metric (``trec_eval -c``); run
  questions without qrels are ignored;
- raw mode keeps questions without any relevant candidate: they score 0 (trec_eval's AP with no
  relevant document), which lowers the mean. ``clean=True`` keeps only ``clean_qids``: questions
  with at least one relevant and one non-relevant candidate (the TrecQA "clean" setting).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import ir_measures
import numpy as np
import pandas as pd
from ir_measures import AP, RR, P, nDCG

from qa_core.types import Question

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, int]]

MEASURES = {"map": AP, "mrr": RR, "p@1": P @ 1, "ndcg@10": nDCG @ 10}
METRICS = tuple(MEASURES)
_NAME_OF = {str(measure): name for name, measure in MEASURES.items()}


@dataclass
class EvalResult:
    aggregate: dict[str, float]  # metric -> mean over the evaluated questions (NaN when none)
    per_query: pd.DataFrame  # index qid, one column per metric
    questions: int
    clean: bool


def clean_qids(qrels: Qrels) -> list[str]:
    """Questions with at least one relevant (grade > 0) and one non-relevant candidate."""
    return [
        qid
        for qid, grades in qrels.items()
        if any(g > 0 for g in grades.values()) and any(g <= 0 for g in grades.values())
    ]


def evaluate(run: Run, qrels: Qrels, clean: bool = False) -> EvalResult:
    """Per-question and mean metrics of ``run`` against ``qrels`` (see the module docstring)."""
    qids = clean_qids(qrels) if clean else list(qrels)
    judged = {qid: {doc: int(grade) for doc, grade in qrels[qid].items()} for qid in qids}
    scored = {qid: {doc: float(s) for doc, s in run[qid].items()} for qid in qids if run.get(qid)}
    per_query = pd.DataFrame(0.0, index=pd.Index(qids, name="qid", dtype=object), columns=list(METRICS))
    if scored:
        evaluator = ir_measures.pytrec_eval.evaluator(list(MEASURES.values()), judged)
        for metric in evaluator.iter_calc(scored):
            per_query.at[metric.query_id, _NAME_OF[str(metric.measure)]] = float(metric.value)
    aggregate = {name: float(per_query[name].mean()) if qids else float("nan") for name in METRICS}
    return EvalResult(aggregate=aggregate, per_query=per_query, questions=len(qids), clean=clean)


def run_from_scores(questions: Sequence[Question], scores: Sequence[np.ndarray]) -> dict[str, dict[str, float]]:
    """``{qid: {doc_id: score}}`` from one score array per question, aligned with its candidates."""
    if len(questions) != len(scores):
        raise ValueError(f"{len(questions)} questions but {len(scores)} score arrays")
    run: dict[str, dict[str, float]] = {}
    for question, question_scores in zip(questions, scores):
        if len(question.candidates) != len(question_scores):
            raise ValueError(
                f"question {question.qid}: {len(question.candidates)} candidates but {len(question_scores)} scores"
            )
        run[question.qid] = {c.doc_id: float(s) for c, s in zip(question.candidates, question_scores)}
    return run


def qrels_from_questions(questions: Sequence[Question]) -> dict[str, dict[str, int]]:
    """``{qid: {doc_id: grade}}`` over labelled candidates; questions with none are left out."""
    qrels: dict[str, dict[str, int]] = {}
    for question in questions:
        grades = {c.doc_id: int(c.label) for c in question.candidates if c.label is not None}
        if grades:
            qrels[question.qid] = grades
    return qrels

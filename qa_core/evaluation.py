"""MAP, MRR, P@1 and nDCG@10 through ir-measures' pytrec_eval backend (trec_eval semantics).

Conventions, all from trec_eval:
- a candidate is relevant when its grade is > 0; nDCG uses the grade as gain;
- tied scores are ordered by doc_id descending (trec_eval's tie break, ``qa_core.ordering``: the one
  rule of every ordering in the project); ``tie_aware`` says how much that choice decides;
- questions of the qrels missing from the run score 0 on every metric (``trec_eval -c``); run
  questions without qrels are ignored;
- raw mode keeps questions without any relevant candidate: they score 0 (trec_eval's AP with no
  relevant document), which lowers the mean. ``clean=True`` keeps only ``clean_qids``: questions
  with at least one relevant and one non-relevant candidate (the TrecQA "clean" setting);
- a candidate without a judgement counts as not relevant (trec_eval's rule); ``judgements`` says
  how much of a run that touches (judged@10) and gives, beside the standard numbers, measures made
  for incomplete judgements that skip the unjudged candidates instead (bpref, condensed lists).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import ir_measures
import numpy as np
import pandas as pd
from ir_measures import AP, RR, Bpref, Judged, P, nDCG

from qa_core import ordering
from qa_core.types import Question

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, int]]

MEASURES = {"map": AP, "mrr": RR, "p@1": P @ 1, "ndcg@10": nDCG @ 10}
METRICS = tuple(MEASURES)
METRIC_LABELS = {"map": "MAP", "mrr": "MRR", "p@1": "P@1", "ndcg@10": "nDCG@10"}
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


# ------------------------------------------------------------------------------- tied scores


@dataclass
class TieReport:
    """How much of a run's result its tie rule decides, over the questions ``evaluate`` evaluates.

    ``expected``: each metric's mean over all orders of the tied candidates (McSherry and Najork,
    ECIR 2008), ``worst``/``best``: the metric with the relevant tied candidates last/first. Without
    ties the three equal ``evaluate``'s values.
    """

    tied_candidates: int  # candidates sharing their score with another of their pool
    candidates: int
    questions_with_ties: int
    questions: int
    expected: dict[str, float]
    worst: dict[str, float]
    best: dict[str, float]

    def decides(self, metric: str, digits: int = 4) -> bool:
        """Whether the order of the tied candidates changes ``metric`` (worst != best at ``digits``)."""
        return self.best[metric] - self.worst[metric] >= 10 ** -(digits + 1)

    def range_text(self, metric: str, digits: int = 4) -> str:
        """``expected (worst..best)``, or the value alone when the ties decide nothing."""
        low, mean, high = self.worst[metric], self.expected[metric], self.best[metric]
        if not self.decides(metric, digits):
            return f"{mean:.{digits}f}"
        return f"{mean:.{digits}f} ({low:.{digits}f}..{high:.{digits}f})"

    def describe(self) -> str:
        """One sentence for a page or the command line: a range only for a metric the ties change."""
        if not self.tied_candidates:
            return "No tied scores: the scores alone decide the order."
        counted = _counted(self.tied_candidates, self.candidates, self.questions_with_ties, self.questions)
        changed = [f"{METRIC_LABELS[m]} {self.range_text(m)}" for m in METRICS if self.decides(m)]
        kept = [f"{METRIC_LABELS[m]} {self.range_text(m)}" for m in METRICS if not self.decides(m)]
        orders = (f"Over all orders of the tied candidates (expected, worst..best): {', '.join(changed)}" if changed
                  else "No order of the tied candidates changes a metric")
        if kept:
            orders += f"{'; they do not change' if changed else ':'} {', '.join(kept)}"
        return (f"{counted} share their score with another; the metrics order them by doc id descending, as "
                f"trec_eval does. {orders}.")

    def to_dict(self) -> dict[str, object]:
        """The report as plain data (the CLI's JSON)."""
        return {"tied_candidates": self.tied_candidates, "candidates": self.candidates,
                "questions_with_ties": self.questions_with_ties, "questions": self.questions,
                "tie_aware": {"expected": self.expected, "worst": self.worst, "best": self.best}}


def _counted(part: int, candidates: int, part_questions: int, questions: int, what: str = "candidates") -> str:
    """``part of candidates <what> (in part_questions of questions questions)``: how much of a run a
    report's finding (ties, unjudged candidates) touches, in the words of its ``describe``."""
    return f"{part:,} of {candidates:,} {what} (in {part_questions:,} of {questions:,} questions)"


def tie_groups(scores: Mapping[str, float], grades: Mapping[str, int]) -> list[list[int]]:
    """One question's grades (0 for unjudged) in runs of equal scores, best score first."""
    groups: list[list[int]] = []
    previous: float | None = None
    for doc_id, score in ordering.ranked(scores):
        if score != previous:
            groups.append([])
            previous = score
        groups[-1].append(int(grades.get(doc_id, 0)))
    return groups


def _expected_query(groups: Sequence[Sequence[int]], grades: Mapping[str, int]) -> dict[str, float]:
    """trec_eval's AP, RR, P@1 and nDCG@10 of one question, each averaged over every order of the
    tied candidates, in closed form (McSherry and Najork 2008, section 3): not by enumerating the
    orders, which grow as the factorial of a tie group. Written here because no maintained library
    (ir-measures, ranx, pytrec_eval) computes tie-aware measures."""
    relevant = sum(g > 0 for g in grades.values())
    ideal = sorted((max(g, 0) for g in grades.values()), reverse=True)[:10]
    idcg = sum(gain / math.log2(i + 2) for i, gain in enumerate(ideal))
    ap = rr = dcg = 0.0
    p1 = None
    before, seen_relevant = 0, 0  # candidates and relevant candidates of the groups above
    for group in groups:
        n, r = len(group), sum(g > 0 for g in group)
        mean_gain = sum(max(g, 0) for g in group) / n
        for j in range(before + 1, min(before + n, 10) + 1):
            dcg += mean_gain / math.log2(j + 1)
        if p1 is None:
            p1 = r / n
        if r:
            # E[rel(j) * relevant among 1..j] / j, summed over the group's positions j.
            for j in range(before + 1, before + n + 1):
                others = (j - before - 1) * (r - 1) / (n - 1) if n > 1 else 0.0
                ap += (r / n) * (seen_relevant + 1 + others) / j
            if seen_relevant == 0:  # the first relevant candidate falls in this group
                # P(first relevant at group position k) = C(n-k, r-1) / C(n, r)
                rr = sum(math.comb(n - k, r - 1) / math.comb(n, r) / (before + k) for k in range(1, n - r + 2))
        seen_relevant += r
        before += n
    return {"map": ap / relevant if relevant else 0.0, "mrr": rr, "p@1": p1 or 0.0,
            "ndcg@10": dcg / idcg if idcg > 0 else 0.0}


def _ordered(run: Run, qrels: Qrels, relevant_first: bool) -> dict[str, dict[str, float]]:
    """The run with its ties broken by grade (relevant first or last), as distinct scores."""
    out: dict[str, dict[str, float]] = {}
    for qid, scores in run.items():
        grades = qrels.get(qid, {})
        sign = -1 if relevant_first else 1
        ranked = sorted(scores, key=lambda doc: (-float(scores[doc]), sign * int(grades.get(doc, 0))))
        out[qid] = {doc: float(len(ranked) - position) for position, doc in enumerate(ranked)}
    return out


def tie_aware(run: Run, qrels: Qrels, clean: bool = False) -> TieReport:
    """The tie report of ``run`` over the questions ``evaluate(run, qrels, clean)`` evaluates."""
    qids = clean_qids(qrels) if clean else list(qrels)
    expected = pd.DataFrame(0.0, index=pd.Index(qids, dtype=object), columns=list(METRICS))
    tied = candidates = with_ties = 0
    for qid in qids:
        scores = run.get(qid)
        if not scores:
            continue
        flags = ordering.tied_flags(list(scores.values()))
        tied += sum(flags)
        candidates += len(flags)
        with_ties += any(flags)
        values = _expected_query(tie_groups(scores, qrels[qid]), qrels[qid])
        for metric, value in values.items():
            expected.at[qid, metric] = value
    return TieReport(
        tied_candidates=tied,
        candidates=candidates,
        questions_with_ties=with_ties,
        questions=len(qids),
        expected={name: float(expected[name].mean()) if qids else float("nan") for name in METRICS},
        worst=evaluate(_ordered(run, qrels, relevant_first=False), qrels, clean).aggregate,
        best=evaluate(_ordered(run, qrels, relevant_first=True), qrels, clean).aggregate,
    )


# ------------------------------------------------------------------------ incomplete judgements

JUDGED_DEPTH = 10  # judged@k's k: the ranks a reader of a result list looks at
JUDGED_FLAG = 0.8  # a system whose top JUDGED_DEPTH is judged less than this is flagged beside its numbers
# Measures made for incomplete judgements: each skips the unjudged candidates instead of counting
# them as not relevant. bpref (Buckley and Voorhees 2004) and the condensed-list AP and nDCG (Sakai
# 2007: the run with its unjudged candidates removed), which Sakai found the more robust.
INCOMPLETE_MEASURES = {
    "bpref": Bpref,
    "condensed map": AP(judged_only=True),
    "condensed ndcg@10": nDCG(cutoff=10, judged_only=True),
}
INCOMPLETE_LABELS = {"bpref": "bpref", "condensed map": "condensed MAP", "condensed ndcg@10": "condensed nDCG@10"}
JUDGED_LABEL = f"judged@{JUDGED_DEPTH}"
_JUDGED = Judged @ JUDGED_DEPTH
_INCOMPLETE_OF = {str(measure): name for name, measure in INCOMPLETE_MEASURES.items()}


@dataclass
class JudgementReport:
    """How much of a run's candidates is judged, over the questions ``evaluate`` evaluates, and the
    measures for incomplete judgements beside the standard ones (which count unjudged as not
    relevant, as trec_eval does). Means over the questions; a question the run leaves out scores 0."""

    unjudged: int  # candidates the run ranks in the evaluated questions without a judgement
    candidates: int
    questions_with_unjudged: int
    questions: int
    judged: float  # mean judged@JUDGED_DEPTH: the share of each question's top ranks that is judged
    values: dict[str, float]  # INCOMPLETE_MEASURES' means

    @property
    def complete(self) -> bool:
        return not self.unjudged

    @property
    def flagged(self) -> bool:
        """Whether the run's top ranks are judged too little for its standard numbers to be trusted."""
        return self.judged < JUDGED_FLAG

    def judged_text(self) -> str:
        """``judged@10 0.62``, with the flag when it is below ``JUDGED_FLAG``."""
        flag = f" ⚠ under {JUDGED_FLAG:.0%} judged" if self.flagged else ""
        return f"{JUDGED_LABEL} {self.judged:.2f}{flag}"

    def describe(self) -> str:
        """One sentence for a page or the command line."""
        if self.complete:
            return "All judged: every candidate ranked has a judgement."
        values = ", ".join(f"{INCOMPLETE_LABELS[name]} {value:.4f}" for name, value in self.values.items())
        warning = (f" Its top {JUDGED_DEPTH} is less than {JUDGED_FLAG:.0%} judged: its standard numbers may say more "
                   "about what was judged than about the system; judge more, or read the measures that skip "
                   "the unjudged." if self.flagged else "")
        counted = _counted(self.unjudged, self.candidates, self.questions_with_unjudged, self.questions, "candidates ranked")
        return (f"{self.judged_text()}: {counted} have no judgement; the standard metrics count them as not "
                f"relevant (trec_eval's rule). Skipping them instead: {values}.{warning}")

    def to_dict(self) -> dict[str, object]:
        """The report as plain data (the CLI's JSON)."""
        return {"unjudged": self.unjudged, "candidates": self.candidates,
                "questions_with_unjudged": self.questions_with_unjudged, "questions": self.questions,
                JUDGED_LABEL: self.judged, "flagged": self.flagged, **self.values}


def judgements(run: Run, qrels: Qrels, clean: bool = False) -> JudgementReport:
    """The judgement report of ``run`` over the questions ``evaluate(run, qrels, clean)`` evaluates:
    judged@10 and ``INCOMPLETE_MEASURES`` through ir-measures. Its judged@k provider breaks ties by
    doc id ascending, so the run goes in with the tie rule in its scores (``ordering.strict``)."""
    qids = clean_qids(qrels) if clean else list(qrels)
    judged = {qid: {doc: int(grade) for doc, grade in qrels[qid].items()} for qid in qids}
    scored = {qid: ordering.strict(run[qid]) for qid in qids if run.get(qid)}
    per_query = pd.DataFrame(0.0, index=pd.Index(qids, dtype=object), columns=[JUDGED_LABEL, *INCOMPLETE_MEASURES])
    if scored:
        names = {str(_JUDGED): JUDGED_LABEL, **_INCOMPLETE_OF}
        for metric in ir_measures.iter_calc([_JUDGED, *INCOMPLETE_MEASURES.values()], judged, scored):
            per_query.at[metric.query_id, names[str(metric.measure)]] = float(metric.value)
    holes = {qid: sum(doc not in judged[qid] for doc in scores) for qid, scores in scored.items()}
    means = {name: float(per_query[name].mean()) if qids else float("nan") for name in per_query.columns}
    return JudgementReport(
        unjudged=sum(holes.values()),
        candidates=sum(len(scores) for scores in scored.values()),
        questions_with_unjudged=sum(1 for count in holes.values() if count),
        questions=len(qids),
        judged=means.pop(JUDGED_LABEL),
        values=means,
    )


def mean_judgements(reports: Sequence[JudgementReport]) -> JudgementReport:
    """One report for a group of runs of the same questions (a model's seeds): candidates counted over
    every run, questions with unjudged ones as in the run with most, judged@10 and the measures
    averaged over the runs, as ``significance.average_over_seeds`` averages the metrics."""
    return JudgementReport(
        unjudged=sum(r.unjudged for r in reports), candidates=sum(r.candidates for r in reports),
        questions_with_unjudged=max(r.questions_with_unjudged for r in reports), questions=reports[0].questions,
        judged=sum(r.judged for r in reports) / len(reports),
        values={name: sum(r.values[name] for r in reports) / len(reports) for name in reports[0].values},
    )

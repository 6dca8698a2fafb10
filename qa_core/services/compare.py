"""Two or three models side by side: on one question (aligned rankings and a bump chart) and on a
dataset split (per-question metric deltas, win/tie/loss, paired significance tests, disagreements).

No Streamlit here; the Compare page adds widgets around these calls.

Conventions:
- the first model is the reference: every delta is ``other - reference`` on one metric, so a
  positive delta (a win) means the other model did better on that question;
- per-question values are ``qa_core.evaluation``'s (ir-measures, trec_eval semantics, raw or clean);
- a question ties when its delta is within ``TIE_TOLERANCE`` (metric values are floats);
- the tests are scipy's paired t-test (``ttest_rel``) and Wilcoxon signed-rank (``wilcoxon``,
  two-sided, zero differences dropped as in Wilcoxon's original test); a p-value is ``None`` with a
  note when the test is undefined (fewer than two questions, every question tied, no variance).
"""

from __future__ import annotations

import html
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from qa_core.evaluation import METRICS, evaluate, qrels_from_questions
from qa_core.rankers.base import Ranker
from qa_core.services import workbench
from qa_core.services.experiments import score_questions
from qa_core.services.ranking import Ranking, rank_pool
from qa_core.types import Candidate, InputError, Question

MIN_MODELS, MAX_MODELS = 2, 3
TIE_TOLERANCE = 1e-9
LABEL_CHARS = 48  # candidate text shown in the chart's legend; the hover has all of it


def check_models(models: Sequence[str]) -> list[str]:
    """The chosen model names, distinct and in order; ``InputError`` unless there are two or three."""
    chosen = list(dict.fromkeys(models))
    if not MIN_MODELS <= len(chosen) <= MAX_MODELS:
        raise InputError(f"choose {MIN_MODELS} or {MAX_MODELS} different models to compare, got {len(chosen)}")
    return chosen


# ---------------------------------------------------------------------- one question


@dataclass
class QuestionComparison:
    """Each model's ranking of one pool (``ranking.Ranking``, its table) and the ranks side by side."""

    question: str
    models: list[str]
    rankings: dict[str, Ranking]
    tables: dict[str, pd.DataFrame]
    # One row per candidate (index doc_id): text, gold_label, then each model's rank.
    ranks: pd.DataFrame


def compare_question(rankers: Mapping[str, Ranker], question: str, candidates: Sequence[Candidate]) -> QuestionComparison:
    """Rank ``candidates`` with every model of ``rankers`` (name -> ranker, reference first)."""
    models = check_models(list(rankers))
    question = workbench.check_question(question)
    if not candidates:
        raise InputError("the question has no candidates to compare the models on")
    rankings = {name: rank_pool(rankers[name], question, candidates, model=name) for name in models}
    tables = {name: result.table() for name, result in rankings.items()}
    first = tables[models[0]]
    ranks = pd.DataFrame(
        {"text": [c.text for c in candidates], "gold_label": pd.array([c.label for c in candidates], dtype="Int64")},
        index=pd.Index([c.doc_id for c in candidates], name="doc_id"),
    )
    for name in models:
        ranks[name] = tables[name].set_index("doc_id")["rank"].reindex(ranks.index).astype(int)
    ranks = ranks.loc[first["doc_id"]]  # the reference model's order
    return QuestionComparison(question, models, rankings, tables, ranks)


def aligned_lists(comparison: QuestionComparison, top: int = 10) -> pd.DataFrame:
    """Rows are ranks 1..top, one column per model with the candidate it puts there (a ✓ marks a
    gold-relevant candidate), so the lists read side by side."""
    rows = {"rank": list(range(1, min(top, len(comparison.ranks)) + 1))}
    for name in comparison.models:
        head = comparison.tables[name].head(top)
        rows[name] = [
            ("✓ " if not pd.isna(gold) and gold > 0 else "") + text for text, gold in zip(head["text"], head["gold_label"])
        ]
    return pd.DataFrame(rows)


def bump_figure(comparison: QuestionComparison, top: int = 10) -> go.Figure:
    """A slope ("bump") chart: x the models, y the rank (1 on top), one line per candidate that is in
    any model's top ``top``. Gold-relevant candidates have star markers. Text is HTML-escaped
    because plotly renders a subset of HTML in legends and hover text."""
    ranks = comparison.ranks
    shown = ranks[(ranks[comparison.models] <= top).any(axis=1)]
    models = [html.escape(name) for name in comparison.models]
    figure = go.Figure()
    for doc_id, row in shown.iterrows():
        relevant = not pd.isna(row["gold_label"]) and row["gold_label"] > 0
        text = row["text"] if len(row["text"]) <= LABEL_CHARS else row["text"][: LABEL_CHARS - 1] + "…"
        figure.add_trace(
            go.Scatter(
                x=models,
                y=[int(row[name]) for name in comparison.models],
                mode="lines+markers",
                name=html.escape(("✓ " if relevant else "") + text),
                marker={"symbol": "star" if relevant else "circle", "size": 13 if relevant else 8},
                line={"width": 3 if relevant else 1.5},
                hovertext=html.escape(f"{doc_id}: {row['text']}"),
                hovertemplate="%{hovertext}<br>%{x}: rank %{y}<extra></extra>",
            )
        )
    deepest = int(shown[comparison.models].to_numpy().max()) if len(shown) else 1
    figure.update_yaxes(autorange="reversed", title_text="rank", dtick=1 if deepest <= 20 else None, zeroline=False)
    figure.update_xaxes(title_text="model")
    figure.update_layout(
        title={"text": f"Rank of each candidate in the top {top} of any model"},
        height=max(360, 28 * min(deepest, 40) + 160),
        legend={"title": {"text": "candidate (✓ gold relevant)"}},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return figure


# ---------------------------------------------------------------------- a dataset split


@dataclass(frozen=True)
class PairedTest:
    name: str  # "paired t-test" or "Wilcoxon signed-rank"
    statistic: float | None
    p_value: float | None
    note: str = ""  # why the test is undefined, when it is


@dataclass(frozen=True)
class PairSummary:
    """One model against the reference on one metric over the split's questions."""

    reference: str
    model: str
    metric: str
    questions: int
    mean_delta: float
    wins: int  # questions where ``model`` scores higher than the reference
    ties: int
    losses: int
    tests: list[PairedTest]


@dataclass
class SplitComparison:
    models: list[str]
    metric: str
    clean: bool
    means: pd.DataFrame  # index model, one column per metric
    # One row per evaluated question (index qid): question, each model's metric value and top-1
    # candidate, "Δ <model>" for every non-reference model, "same top-1".
    per_question: pd.DataFrame
    summaries: list[PairSummary] = field(default_factory=list)


def delta_column(model: str) -> str:
    return f"Δ {model}"


def win_tie_loss(deltas: Sequence[float], tolerance: float = TIE_TOLERANCE) -> tuple[int, int, int]:
    """Counts of deltas above ``tolerance``, within it, and below ``-tolerance``."""
    values = np.asarray(deltas, dtype=float)
    wins, losses = int((values > tolerance).sum()), int((values < -tolerance).sum())
    return wins, len(values) - wins - losses, losses


def paired_tests(model: Sequence[float], reference: Sequence[float]) -> list[PairedTest]:
    """Paired t-test and Wilcoxon signed-rank of ``model`` against ``reference`` (scipy.stats),
    two-sided; undefined cases give ``None`` with a note instead of scipy's NaN and warnings."""
    from scipy.stats import ttest_rel, wilcoxon  # imported on use: scipy.stats takes a second to load

    a, b = np.asarray(model, dtype=float), np.asarray(reference, dtype=float)
    differences = a - b
    nonzero = np.abs(differences) > TIE_TOLERANCE
    if len(differences) < 2:
        note = "needs two or more questions"
        return [PairedTest("paired t-test", None, None, note), PairedTest("Wilcoxon signed-rank", None, None, note)]
    if not nonzero.any():
        note = "every question ties"
        return [PairedTest("paired t-test", None, None, note), PairedTest("Wilcoxon signed-rank", None, None, note)]
    # Equal differences up to rounding make scipy return an absurd t (1e16) instead of NaN.
    constant = float(np.ptp(differences)) <= TIE_TOLERANCE
    results = []
    for name, test, undefined in (
        ("paired t-test", ttest_rel, "the differences have no variance"),
        ("Wilcoxon signed-rank", wilcoxon, "too few non-tied questions"),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy warns on degenerate input; we report None below
            outcome = test(a, b)
        statistic, p_value = float(outcome.statistic), float(outcome.pvalue)
        if math.isfinite(statistic) and math.isfinite(p_value) and not (constant and test is ttest_rel):
            results.append(PairedTest(name, statistic, p_value))
        else:
            results.append(PairedTest(name, None, None, undefined))
    return results


def compare_split(
    rankers: Mapping[str, Ranker], questions: Sequence[Question], metric: str = "map", clean: bool = False
) -> SplitComparison:
    """Score every question's own pool with each model (reference first) and compare per question.

    Questions without gold labels are left out (``qa_core.evaluation``); ``InputError`` when none
    is left to evaluate.
    """
    models = check_models(list(rankers))
    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    pooled = [q for q in questions if q.candidates]
    qrels = qrels_from_questions(pooled)
    if not qrels:
        raise InputError("no question of this split has gold labels: there is nothing to compare on")
    runs = {name: score_questions(rankers[name], pooled) for name in models}
    results = {name: evaluate(runs[name], qrels, clean=clean) for name in models}
    qids = list(results[models[0]].per_query.index)
    if not qids:
        raise InputError("no question is left to compare on (the clean setting keeps only questions "
                         "with a relevant and a non-relevant candidate)")
    text_of = {q.qid: q.text for q in pooled}
    candidate_text = {q.qid: {c.doc_id: c.text for c in q.candidates} for q in pooled}
    table = pd.DataFrame({"question": [text_of[qid] for qid in qids]}, index=pd.Index(qids, name="qid"))
    for name in models:
        table[name] = results[name].per_query.loc[qids, metric].to_numpy()
    reference = models[0]
    for name in models[1:]:
        table[delta_column(name)] = table[name] - table[reference]
    tops = {name: [top_document(runs[name][qid]) for qid in qids] for name in models}
    for name in models:
        table[f"top-1 {name}"] = [candidate_text[qid][doc] for qid, doc in zip(qids, tops[name])]
    table["same top-1"] = [len({tops[name][i] for name in models}) == 1 for i in range(len(qids))]

    summaries = []
    for name in models[1:]:
        deltas = table[delta_column(name)]
        wins, ties, losses = win_tie_loss(deltas)
        summaries.append(
            PairSummary(
                reference, name, metric, len(qids), float(deltas.mean()), wins, ties, losses,
                paired_tests(table[name], table[reference]),
            )
        )
    means = pd.DataFrame({name: results[name].aggregate for name in models}).T[list(METRICS)]
    means.index.name = "model"
    return SplitComparison(models, metric, clean, means, table, summaries)


def top_document(scores: Mapping[str, float]) -> str:
    """The doc id a run ranks first, ties broken as trec_eval does (doc id descending)."""
    return max(scores.items(), key=lambda item: (item[1], item[0]))[0]


def disagreements(comparison: SplitComparison, threshold: float = 0.0, different_top1: bool = True) -> pd.DataFrame:
    """The questions where the models disagree: a different top-1 candidate (if ``different_top1``)
    or, for some model, ``|Δ metric| > threshold``; largest absolute delta first."""
    table = comparison.per_question
    deltas = table[[delta_column(name) for name in comparison.models[1:]]].abs().max(axis=1)
    mask = deltas > threshold
    if different_top1:
        mask |= ~table["same top-1"]
    return table[mask].assign(_largest=deltas[mask]).sort_values("_largest", ascending=False, kind="stable").drop(
        columns="_largest"
    )


def summary_table(comparison: SplitComparison) -> pd.DataFrame:
    """One row per non-reference model: mean delta, W/T/L and both tests' p-values."""
    rows = []
    for summary in comparison.summaries:
        row = {
            "model": summary.model,
            "vs": summary.reference,
            "questions": summary.questions,
            f"mean Δ {summary.metric}": summary.mean_delta,
            "wins": summary.wins,
            "ties": summary.ties,
            "losses": summary.losses,
        }
        for test in summary.tests:
            row[f"{test.name} p"] = test.p_value
        row["note"] = "; ".join(f"{test.name}: {test.note}" for test in summary.tests if test.note)
        rows.append(row)
    return pd.DataFrame(rows)

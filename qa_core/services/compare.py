"""Two or three models side by side: on one question (aligned rankings and a bump chart) and on a
dataset split (per-question metric deltas, the significance table of ``qa_core.significance``, a
sorted delta chart and a metric-vs-metric scatter, disagreements), for models, stored or fused runs,
and groups of seed runs.

No Streamlit here; the Compare page adds widgets around these calls.

Conventions:
- the first model is the reference: every delta is ``other - reference`` on one metric, so a
  positive delta (a win) means the other model did better on that question;
- per-question values are ``qa_core.evaluation``'s (ir-measures, trec_eval semantics, raw or clean);
- a candidate without a judgement is not relevant in every number (trec_eval's rule); where a run
  ranks unjudged candidates, ``judgements`` holds each model's judged@10 and the measures made for
  incomplete judgements (``qa_core.evaluation.judgements``), shown beside the means, never instead;
- a question ties when its delta is within ``TIE_TOLERANCE`` (metric values are floats);
- the tests are ``qa_core.significance``'s: paired t-test and Fisher randomisation test, two-sided,
  Holm-adjusted over every pair of models, with the minimum detectable difference (the Wilcoxon
  signed-rank test this page used to show is gone: IR compares systems with the randomisation test);
  a p-value is ``None`` with a note when the test is undefined (fewer than two questions; for the
  t-test also every question tied or no variance).
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
import plotly.graph_objects as go

from qa_core import ordering, significance
from qa_core.evaluation import (
    INCOMPLETE_LABELS,
    JUDGED_LABEL,
    METRICS,
    JudgementReport,
    Run,
    TieReport,
    judgements,
    mean_judgements,
    qrels_from_questions,
    tie_aware,
)
from qa_core.rankers.base import Ranker
from qa_core.services import candidate_pools
from qa_core.services.experiments import score_questions
from qa_core.services.ranking import Ranking, rank_pool
from qa_core.services.text_views import text_width
from qa_core.significance import TIE_TOLERANCE, win_tie_loss  # noqa: F401 (win_tie_loss: part of this API)
from qa_core.types import Candidate, InputError, Question

MIN_MODELS, MAX_MODELS = 2, 3
LABEL_CHARS = 40  # candidate text written at a bump chart line's end; the hover has all of it
LABEL_PX = 12  # its font size
ROW_PX = 24  # one row (a rank a line takes) of the bump chart: room for a 12 px label at each line's end
RIGHT_COLOUR = "#2ca02c"
OTHER_COLOURS = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#d62728"]
TITLE_CHARS = 48  # a chart title wraps here: a half-width chart at 1280 px holds about this many


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
    question = candidate_pools.check_question(question)
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
    """A slope ("bump") chart: x the models, y the rank (1 on top), one line for each of the
    reference's top ``top`` candidates and each right (gold-relevant) answer, wherever the models
    put them. Right answers are green with star markers; each line is named at its right end
    (the last model's rank), so no legend is needed. Text is HTML-escaped because plotly renders a
    subset of HTML in labels and hover text.

    The y axis has a row for each rank a line takes, not for every rank down to the deepest (ten
    lines at ranks 1-10 and a right answer at 77 drew a 2,000 px chart with the ten bunched at its
    top): the ticks name the ranks, and a dotted line marks where ranks are left out. The models
    span the plot's width; the labels get the right margin they measure."""
    ranks = comparison.ranks
    reference = comparison.models[0]
    relevant = ranks["gold_label"].fillna(0) > 0
    shown = ranks[(ranks[reference] <= top) | relevant]
    rows = sorted({int(rank) for rank in shown[comparison.models].to_numpy().ravel()}) or [1]
    row_of = {rank: row for row, rank in enumerate(rows)}
    models = [html.escape(name) for name in comparison.models]
    figure = go.Figure()
    others = iter(OTHER_COLOURS * (len(shown) // len(OTHER_COLOURS) + 1))
    widest = 0.0
    for doc_id, row in shown.iterrows():
        right = bool(relevant[doc_id])
        text = row["text"] if len(row["text"]) <= LABEL_CHARS else row["text"][: LABEL_CHARS - 1] + "…"
        widest = max(widest, text_width(("✓ " if right else "") + text, LABEL_PX))
        label = html.escape(("✓ " if right else "") + text)
        colour = RIGHT_COLOUR if right else next(others)
        ys = [int(row[name]) for name in comparison.models]
        figure.add_trace(
            go.Scatter(
                x=models, y=[row_of[y] for y in ys], customdata=ys, mode="lines+markers", name=label, showlegend=False,
                marker={"symbol": "star" if right else "circle", "size": 14 if right else 8, "color": colour},
                line={"width": 3.5 if right else 1.5, "color": colour},
                opacity=1.0 if right else 0.75,
                hovertext=html.escape(f"{doc_id}: {row['text']}"),
                hovertemplate="%{hovertext}<br>%{x}: rank %{customdata}<extra></extra>",
            )
        )
        figure.add_annotation(x=models[-1], y=row_of[ys[-1]], text=label, showarrow=False, xanchor="left", xshift=12,
                              font={"size": LABEL_PX, "color": "#1b5e20" if right else "#31333f"})
    for row, (rank, below) in enumerate(zip(rows, rows[1:])):
        if below > rank + 1:  # ranks between these two are left out
            figure.add_hline(y=row + 0.5, line={"dash": "dot", "color": "#d0d0d0", "width": 1})
    figure.update_yaxes(autorange="reversed", title_text="rank (dotted: ranks left out)", zeroline=False,
                        tickvals=list(range(len(rows))), ticktext=[str(rank) for rank in rows], showgrid=False)
    figure.update_xaxes(title_text="model", range=[-0.15, len(models) - 0.9])
    figure.update_layout(
        title={"text": html.escape(f"Rank of the top {top} of {reference} and of the right answers (✓)")
               .replace(" and of", "<br>and of"), "font": {"size": 15}},
        height=max(300, ROW_PX * len(rows) + 170), showlegend=False,
        margin={"l": 10, "r": round(widest) + 30, "t": 70, "b": 10},
    )
    return figure


# ---------------------------------------------------------------------- a dataset split


@dataclass
class SplitComparison:
    models: list[str]
    metric: str
    clean: bool
    means: pd.DataFrame  # index model, one column per metric
    # One row per evaluated question (index qid): question, each model's metric value and top-1
    # candidate, "Δ <model>" for every non-reference model, "same top-1". Seed groups have no top-1
    # (each seed ranks differently): their table has no top-1 columns.
    per_question: pd.DataFrame
    # Every pair on every metric: intervals, randomisation and t-tests, Holm, MDD (qa_core.significance).
    significance: significance.Comparison
    # The pairs with the reference on ``metric`` (model order).
    summaries: list[significance.PairComparison] = field(default_factory=list)
    runs: dict[str, Run] = field(default_factory=dict)  # each model's run, when it has one (not seed groups)
    ties: dict[str, TieReport] = field(default_factory=dict)  # each run's tied scores (not seed groups)
    # Each model's judged@10 and incomplete-judgement measures (a seed group's: its runs' mean).
    judgements: dict[str, JudgementReport] = field(default_factory=dict)

    def ties_lines(self) -> list[str]:
        """What the ties of each run decide: a line for each model whose run has tied scores."""
        return [f"Tied scores, {name}: {report.describe()}" for name, report in self.ties.items() if report.tied_candidates]

    @property
    def has_unjudged(self) -> bool:
        """Whether any model ranks a candidate without a judgement."""
        return any(not report.complete for report in self.judgements.values())

    def judgement_lines(self) -> list[str]:
        """A line for every model when any ranks unjudged candidates (none when all is judged)."""
        if not self.has_unjudged:
            return []
        return [f"Judgements, {name}: {report.describe()}" for name, report in self.judgements.items()]


def delta_column(model: str) -> str:
    return f"Δ {model}"


def _judged(questions: Sequence[Question], metric: str) -> tuple[list[Question], dict[str, dict[str, int]]]:
    """The questions with candidates and their gold labels; ``InputError`` when nothing is judged."""
    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    pooled = [q for q in questions if q.candidates]
    qrels = qrels_from_questions(pooled)
    if not qrels:
        raise InputError("no question of this split has labels (under the label rule chosen): there is nothing to compare on")
    return pooled, qrels


def compare_split(
    rankers: Mapping[str, Ranker], questions: Sequence[Question], metric: str = "map", clean: bool = False
) -> SplitComparison:
    """Score every question's own pool with each model (reference first) and compare per question.

    Questions without gold labels are left out (``qa_core.evaluation``); ``InputError`` when none
    is left to evaluate.
    """
    models = check_models(list(rankers))
    pooled, _ = _judged(questions, metric)
    return compare_runs({name: score_questions(rankers[name], pooled) for name in models}, pooled, metric, clean)


def compare_runs(
    runs: Mapping[str, Run], questions: Sequence[Question], metric: str = "map", clean: bool = False
) -> SplitComparison:
    """``compare_split`` for runs already made (scored models, stored or fused runs): a question a
    run leaves out scores 0, as in trec_eval."""
    models = check_models(list(runs))
    pooled, qrels = _judged(questions, metric)
    values = significance.per_query({name: runs[name] for name in models}, qrels, clean)
    tops = {name: {qid: top_document(runs[name][qid]) for qid in values[name].index if runs[name].get(qid)}
            for name in models}
    return _split_comparison(values, pooled, metric, clean, tops, {name: dict(runs[name]) for name in models},
                             ties={name: tie_aware(runs[name], qrels, clean) for name in models},
                             judged={name: judgements(runs[name], qrels, clean) for name in models})


def compare_seed_runs(
    groups: Mapping[str, Sequence[Run]], questions: Sequence[Question], metric: str = "map", clean: bool = False
) -> SplitComparison:
    """Two or three models, each given by several runs (one per seed or model version): per question,
    each model's metric averaged over its runs (``significance.average_over_seeds``), then compared."""
    models = check_models(list(groups))
    pooled, qrels = _judged(questions, metric)
    empty = [name for name in models if not groups[name]]
    if empty:
        raise InputError(f"no runs of {', '.join(empty)} on this split")
    values = {
        name: significance.average_over_seeds(list(significance.per_query(dict(enumerate(groups[name])), qrels,
                                                                          clean).values()))
        for name in models
    }
    judged = {name: mean_judgements([judgements(run, qrels, clean) for run in groups[name]]) for name in models}
    return _split_comparison(values, pooled, metric, clean, tops=None, runs={}, judged=judged)


def _split_comparison(
    values: Mapping[str, pd.DataFrame], questions: Sequence[Question], metric: str, clean: bool,
    tops: Mapping[str, Mapping[str, str]] | None, runs: dict[str, Run], ties: dict[str, TieReport] | None = None,
    judged: dict[str, JudgementReport] | None = None,
) -> SplitComparison:
    models = list(values)
    qids = list(values[models[0]].index)
    if not qids:
        raise InputError("no question is left to compare on (the clean setting keeps only questions "
                         "with a relevant and a non-relevant candidate)")
    text_of = {q.qid: q.text for q in questions}
    table = pd.DataFrame({"question": [text_of[qid] for qid in qids]}, index=pd.Index(qids, name="qid"))
    for name in models:
        table[name] = values[name].loc[qids, metric].to_numpy()
    reference = models[0]
    for name in models[1:]:
        table[delta_column(name)] = table[name] - table[reference]
    if tops is not None:
        candidate_text = {q.qid: {c.doc_id: c.text for c in q.candidates} for q in questions}
        for name in models:
            table[f"top-1 {name}"] = [candidate_text[qid].get(tops[name].get(qid), "") for qid in qids]
        table["same top-1"] = [len({tops[name].get(qid) for name in models}) == 1 for qid in qids]
    result = significance.compare_values(values)
    summaries = [pair for pair in result.pairs_for(metric) if pair.reference == reference]
    means = result.means.rename_axis("model")
    return SplitComparison(models, metric, clean, means, table, result, summaries, runs, ties or {}, judged or {})


def top_document(scores: Mapping[str, float]) -> str:
    """The doc id a run ranks first (``qa_core.ordering``: ties as trec_eval breaks them)."""
    return ordering.ranked(scores)[0][0]


def disagreements(
    comparison: SplitComparison, threshold: float = 0.0, different_top1: bool = True, most: int | None = None
) -> pd.DataFrame:
    """The questions where the models disagree: a different top-1 candidate (if ``different_top1``
    and the comparison has top-1 columns) or, for some model, ``|Δ metric| > threshold``; largest
    absolute delta first, at most ``most`` of them."""
    table = comparison.per_question
    deltas = table[[delta_column(name) for name in comparison.models[1:]]].abs().max(axis=1)
    mask = deltas > threshold
    if different_top1 and "same top-1" in table:
        mask |= ~table["same top-1"]
    chosen = table[mask].assign(_largest=deltas[mask]).sort_values("_largest", ascending=False, kind="stable")
    return chosen.drop(columns="_largest").head(most)


def _with_interval(mean: float, low: float, high: float) -> str:
    if math.isnan(mean):
        return ""
    return f"{mean:.3f}" if math.isnan(low) else f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def means_table(comparison: SplitComparison) -> pd.DataFrame:
    """One row per model (reference first), one column per metric: the mean and its 95% bootstrap
    interval as one cell, "0.670 [0.641, 0.699]", as a paper prints it. Where a model ranks
    unjudged candidates, judged@10 (flagged under 80%) and the incomplete-judgement measures follow,
    each named: the standard columns stay trec_eval's."""
    result = comparison.significance
    table = pd.DataFrame(index=pd.Index(result.systems, name="model"))
    for metric in result.metrics:
        table[significance.METRIC_LABELS.get(metric, metric)] = [
            _with_interval(result.means.at[name, metric], result.ci_low.at[name, metric], result.ci_high.at[name, metric])
            for name in result.systems
        ]
    if comparison.has_unjudged:
        reports = [comparison.judgements[name] for name in result.systems]
        table[JUDGED_LABEL] = [report.judged_text().removeprefix(f"{JUDGED_LABEL} ") for report in reports]
        for measure, label in INCOMPLETE_LABELS.items():
            table[label] = [f"{report.values[measure]:.3f}" for report in reports]
    return table


def pairs_summary(comparison: SplitComparison) -> pd.DataFrame:
    """The columns of ``summary_table`` that decide, as text: one row per pair ("model vs
    reference"), mean Δ, wins/ties/losses, both tests' Holm-adjusted p-values, the minimum detectable
    difference and the verdict. Undefined values are blank, never "None"."""
    table = summary_table(comparison)
    return pd.DataFrame(
        {
            "mean Δ": [f"{value:+.3f}" for value in table["mean Δ"]],
            "W/T/L": [f"{w}/{t}/{loss}" for w, t, loss in zip(table["wins"], table["ties"], table["losses"])],
            "randomisation p (Holm)": [_p(value) for value in table["randomisation p (Holm)"]],
            "t-test p (Holm)": [_p(value) for value in table["t-test p (Holm)"]],
            "MDD": ["" if value is None or pd.isna(value) else f"{value:.3f}" for value in table["MDD"]],
            "verdict": table["verdict"].tolist(),
        },
        index=pd.Index([f"{model} vs {vs}" for model, vs in zip(table["model"], table["vs"])], name="pair"),
    )


def _p(value: float | None) -> str:
    text = significance.format_p(value)
    return "" if text == "-" else text


def summary_table(comparison: SplitComparison) -> pd.DataFrame:
    """Every pair of models on the comparison's metric: mean delta, W/T/L, both tests' p-values raw and
    Holm-adjusted over the pairs, the minimum detectable difference and the verdict in words."""
    return comparison.significance.pairs_table(comparison.metric)


def selected_questions(points: Sequence[Mapping]) -> list[str]:
    """The qids of the points selected in ``delta_figure`` or ``scatter_figure`` (their customdata),
    in order, each once: what the page links to Ask."""
    return list(dict.fromkeys(str(point["customdata"][0]) for point in points if point.get("customdata")))


def _label(metric: str) -> str:
    return "AP" if metric == "map" else significance.METRIC_LABELS.get(metric, metric)


def chart_title(text: str) -> str:
    """``text`` escaped and wrapped onto lines of at most ``TITLE_CHARS`` characters (plotly does
    not wrap titles: a long one was cut at the chart's edge)."""
    return "<br>".join(html.escape(line) for line in textwrap.wrap(text, TITLE_CHARS, break_long_words=True))


def delta_figure(comparison: SplitComparison, model: str) -> go.Figure:
    """One bar per question, ``model`` minus the reference on the metric, sorted from the largest
    win to the largest loss (wins green, losses red). Each bar carries its qid (customdata) for
    selection; hover text is HTML-escaped."""
    table = comparison.per_question.sort_values(delta_column(model), ascending=False, kind="stable")
    deltas = table[delta_column(model)]
    reference, label = comparison.models[0], _label(comparison.metric)
    colours = ["#2ca02c" if d > TIE_TOLERANCE else "#d62728" if d < -TIE_TOLERANCE else "#7f7f7f" for d in deltas]
    figure = go.Figure(go.Bar(
        x=list(range(1, len(table) + 1)), y=deltas.tolist(), marker={"color": colours},
        customdata=[[qid] for qid in table.index],
        hovertext=[html.escape(f"{qid}: {text}") for qid, text in zip(table.index, table["question"])],
        hovertemplate="%{hovertext}<br>Δ %{y:+.3f}<extra></extra>",
    ))
    figure.update_layout(
        title={"text": chart_title(f"Δ {label} per question: {model} − {reference}, largest win first")},
        xaxis_title="questions, largest win first", yaxis_title=f"Δ {label}", height=380, clickmode="event+select",
        title_font={"size": 15}, margin={"l": 10, "r": 10, "t": 80, "b": 10},
    )
    return figure


def scatter_figure(comparison: SplitComparison, model: str) -> go.Figure:
    """The reference's per-question metric (x) against ``model``'s (y), one point per question (its
    qid as customdata), with the diagonal: points above it are questions ``model`` wins. Many
    questions share a point (AP 1.0 against 1.0): a point's size grows with how many, and its hover
    says so."""
    table = comparison.per_question
    reference, label = comparison.models[0], _label(comparison.metric)
    shared = table.groupby([reference, model])[reference].transform("size")  # questions at each point
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line={"dash": "dot", "color": "#999"},
                                hoverinfo="skip", showlegend=False))
    figure.add_trace(go.Scatter(
        x=table[reference].tolist(), y=table[model].tolist(), mode="markers", showlegend=False,
        marker={"size": [8 + 4 * math.sqrt(n - 1) for n in shared], "opacity": 0.6, "line": {"width": 1, "color": "#fff"}},
        customdata=[[qid] for qid in table.index],
        hovertext=[html.escape(f"{qid}: {text}" + (f" ({n} questions at this point)" if n > 1 else ""))
                   for qid, text, n in zip(table.index, table["question"], shared)],
        hovertemplate="%{hovertext}<br>%{x:.3f} → %{y:.3f}<extra></extra>",
    ))
    figure.update_layout(
        title={"text": chart_title(f"{label} per question: {reference} (x) against {model} (y)")},
        # constrain="domain": the square plot narrows in a wide column instead of widening its range (-0.5..1.5 at 1920 px)
        xaxis={"title": html.escape(f"{label} {reference}"), "range": [-0.05, 1.05], "constrain": "domain"},
        yaxis={"title": html.escape(f"{label} {model}"), "range": [-0.05, 1.05], "scaleanchor": "x",
               "constrain": "domain"},
        height=440, clickmode="event+select", title_font={"size": 15}, margin={"l": 10, "r": 10, "t": 80, "b": 10},
    )
    return figure

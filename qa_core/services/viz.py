"""Plotly figures: explanations' word x word matrices and the Errors page's slices (word weights and
REL arcs are drawn as text, ``qa_core.services.text_views``).

Tokens sit on numeric axes with escaped tick labels: categorical axes would merge repeated words
("the" twice becomes one column) and plotly renders a subset of HTML in labels and hover text.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Iterable, Sequence

import pandas as pd
import plotly.graph_objects as go

from qa_core import significance
from qa_core.rankers.base import Explanation
from qa_core.structure.trees import Tree

CELL_PX = 28  # one row of a matrix: room for a 12 px label
MIN_HEIGHT_PX = 160
TICK_PX = 12
ABBREVIATE_CHARS = 12  # longer words are cut on the axes; the hover has the whole word
MATRIX_MAX_COLUMNS = 30  # longer answers go down the rows: at 1280 px a column stays wider than a label
MATRIX_MAX_WORDS = 150  # longer answers are shown in groups of consecutive words
MATRIX_GROUPS = 100  # about this many groups then


def _labels(tokens: Iterable[str]) -> list[str]:
    return [html.escape(token) for token in tokens]


def _abbreviated(word: str) -> str:
    word = word if word.strip() else "·"
    return html.escape(word if len(word) <= ABBREVIATE_CHARS else word[: ABBREVIATE_CHARS - 1] + "…")


def _grouped(matrix: Sequence[Sequence[float]], answers: Sequence[str]) -> tuple[list[list[float]], list[str], list[str], int]:
    """Answer columns merged into groups of consecutive words when there are more than
    ``MATRIX_MAX_WORDS``: each cell keeps the group's value of largest magnitude (sign kept). Returns
    the matrix, axis labels, hover names and the group size (1: not grouped)."""
    if len(answers) <= MATRIX_MAX_WORDS:
        return [list(row) for row in matrix], [_abbreviated(a) for a in answers], _labels(answers), 1
    size = math.ceil(len(answers) / MATRIX_GROUPS)
    starts = range(0, len(answers), size)
    grouped = [[max(row[i : i + size], key=abs) for i in starts] for row in matrix]
    labels = [_abbreviated(f"{i + 1}: {answers[i]}") for i in starts]
    hover = [html.escape(f"words {i + 1}–{min(i + size, len(answers))}: " + " ".join(answers[i : i + size])[:80])
             for i in starts]
    return grouped, labels, hover, size


def heatmap_figure(explanation: Explanation, matrix_name: str) -> go.Figure:
    """Question words x answer words of one named matrix, raw values on hover. Axis labels are
    abbreviated to ``ABBREVIATE_CHARS`` (the hover names the whole words) and the column labels
    written upright, so no two overlap. An answer of more than ``MATRIX_MAX_COLUMNS`` words goes
    down the rows instead, one readable row per word (the page scrolls); beyond ``MATRIX_MAX_WORDS``
    words the rows are groups of consecutive words."""
    if matrix_name not in explanation.matrices:
        known = ", ".join(sorted(explanation.matrices)) or "none"
        raise KeyError(f"explanation has no matrix {matrix_name!r} (has: {known})")
    matrix, answer_ticks, answer_hover, group = _grouped(explanation.matrices[matrix_name], explanation.answer_tokens)
    question_ticks, question_hover = [_abbreviated(q) for q in explanation.question_tokens], _labels(explanation.question_tokens)
    hover = [[f"{q} × {a}" for a in answer_hover] for q in question_hover]
    transposed = len(answer_ticks) > MATRIX_MAX_COLUMNS
    if transposed:
        matrix = [list(column) for column in zip(*matrix)] if matrix else []
        hover = [list(column) for column in zip(*hover)] if hover else []
    rows, columns = (answer_ticks, question_ticks) if transposed else (question_ticks, answer_ticks)
    answer_title = "answer words" if group == 1 else f"answer words, in groups of {group}"
    row_title, column_title = ("", "question words") if transposed else ("", answer_title)
    name = html.escape(matrix_name)
    figure = go.Figure(
        go.Heatmap(
            z=matrix,
            x=list(range(len(columns))),
            y=list(range(len(rows))),
            text=hover,
            hovertemplate="%{text}<br>" + name + ": %{z:.4f}<extra></extra>",
            colorscale="Viridis",
            colorbar={"title": {"text": name, "side": "right"}, "thickness": 14},
        )
    )
    figure.update_xaxes(tickvals=list(range(len(columns))), ticktext=columns, tickangle=-90, side="bottom",
                        title_text=column_title, tickfont={"size": TICK_PX}, automargin=True)
    figure.update_yaxes(tickvals=list(range(len(rows))), ticktext=rows, autorange="reversed", title_text=row_title,
                        tickfont={"size": TICK_PX}, automargin=True)
    longest = max((len(label) for label in columns), default=1)
    title = f"{name}: question × {answer_title} (rows: {'answer' if transposed else 'question'})"
    figure.update_layout(
        title={"text": title, "font": {"size": 15}},
        height=max(MIN_HEIGHT_PX, CELL_PX * len(rows) + 7 * min(longest, ABBREVIATE_CHARS) + 130),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return figure


# ---------------------------------------------------------------------------------------------
# Error slices


def slice_bar_figure(slices: pd.DataFrame, by: str, per_question: pd.DataFrame, column: str,
                     metric: str = "AP") -> go.Figure:
    """Mean ``metric`` per slice value (one bar each, in the table's order) with its 95% percentile
    bootstrap interval over the slice's questions (``per_question`` rows whose ``column`` is the
    slice value; none for a slice of one question), and the mean over all questions as a dashed
    line, so a slice's gap to the whole and its uncertainty read together."""
    names = [str(value) for value in slices[by]]
    intervals = [significance.bootstrap_interval(per_question.loc[per_question[column].astype(str) == name, metric])
                 for name in names]
    means = slices[metric].tolist()
    above = [0.0 if math.isnan(high) else high - mean for mean, (_, high) in zip(means, intervals)]
    below = [0.0 if math.isnan(low) else mean - low for mean, (low, _) in zip(means, intervals)]
    interval_text = ["no interval (one question)" if math.isnan(low) else f"95% interval [{low:.3f}, {high:.3f}]"
                     for low, high in intervals]
    label = html.escape(metric)
    figure = go.Figure(
        go.Bar(
            x=_labels(names),
            y=means,
            error_y={"type": "data", "array": above, "arrayminus": below, "visible": True, "color": "#444"},
            customdata=list(zip(slices["questions"], interval_text)),
            hovertemplate="%{x}<br>mean " + label + ": %{y:.3f}<br>%{customdata[1]}<br>questions: %{customdata[0]}"
                          "<extra></extra>",
            marker={"color": "#6c8ebf"},
        )
    )
    overall = float(per_question[metric].mean())
    figure.add_hline(y=overall, line_dash="dash", line_color="#d62728")
    figure.add_annotation(xref="paper", x=1.0, xanchor="left", xshift=6, y=overall, showarrow=False,
                          text=f"all questions<br>{overall:.3f}", align="left", font={"size": 12, "color": "#d62728"})
    figure.update_yaxes(title_text=f"mean {label}", range=[0, 1.05])
    figure.update_xaxes(type="category", title_text=html.escape(by))
    figure.update_layout(
        title={"text": f"mean {label} by {html.escape(by)}, 95% bootstrap intervals", "font": {"size": 15}},
        height=340,
        margin={"l": 10, "r": 100, "t": 50, "b": 10},
    )
    return figure


TICK_RATIO = 1.5  # neighbouring ticks on the version curve's log axis are at least this ratio apart
DATASET_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


# The columns of retraining.versions_table (its METRIC_COLUMNS) that the version curve draws.
VERSION_DEV_MAP, VERSION_TEST_MAP = "dev MAP (kept best, training labels)", "test MAP (gold)"


def version_curve_figure(versions: pd.DataFrame, model: str) -> go.Figure | None:
    """The Train page's versions of ``model`` (``retraining.versions_table``) as MAP against the TRAIN
    labels each was trained on: one colour per dataset (versions of different datasets are never
    joined into one line), dev MAP solid and gold test MAP dashed. Each version is a point; the line
    joins the mean at each label count (dev points round, test points diamonds) (versions retrained on the same labels, e.g. other seeds, are
    not joined to one another). The versions in use (promoted) are ringed. ``None`` when no version
    records its label count."""
    rows = versions.dropna(subset=["train labels"])
    if rows.empty:
        return None
    figure = go.Figure()
    for (dataset, group), colour in zip(rows.groupby("dataset", sort=True), itertools.cycle(DATASET_COLOURS)):
        name = html.escape(str(dataset) or "no dataset")
        for column, dash, symbol in ((VERSION_DEV_MAP, "solid", "circle"), (VERSION_TEST_MAP, "dash", "diamond")):
            points = group.dropna(subset=[column]).sort_values(["train labels", "version"])
            if points.empty:
                continue
            curve = points.groupby("train labels")[column].mean()
            figure.add_trace(go.Scatter(
                x=curve.index.tolist(), y=curve.tolist(), mode="lines", name=f"{name}: {html.escape(column)}",
                legendgroup=f"{name}{column}", line={"color": colour, "dash": dash}, hoverinfo="skip",
            ))
            figure.add_trace(go.Scatter(
                x=points["train labels"].tolist(), y=points[column].tolist(), mode="markers", showlegend=False,
                legendgroup=f"{name}{column}", marker={"color": colour, "size": 8, "symbol": symbol},
                customdata=points["version"].tolist(),
                hovertemplate=f"{name}, version %{{customdata}}<br>%{{x}} labels<br>{html.escape(column)}: %{{y:.4f}}"
                              "<extra></extra>",
            ))
    # Labels on a log axis, as learning curves are read (40 and 5,000 labels on one chart); ticks at
    # the label counts themselves when they are few and far enough apart for their numbers.
    figure.update_xaxes(type="log")
    counts = sorted(float(c) for c in rows["train labels"].unique())
    if len(counts) <= 8 and all(high / low >= TICK_RATIO for low, high in zip(counts, counts[1:])):
        figure.update_xaxes(tickmode="array", tickvals=counts, ticktext=[f"{int(c):,}" for c in counts])
    in_use = rows[rows["in use for"].fillna("").astype(str) != ""].dropna(subset=[VERSION_DEV_MAP])
    if not in_use.empty:
        figure.add_trace(go.Scatter(
            x=in_use["train labels"].tolist(), y=in_use[VERSION_DEV_MAP].tolist(), mode="markers", name="in use (promoted)",
            marker={"symbol": "circle-open", "size": 18, "color": "#d62728", "line": {"width": 3}},
            customdata=[html.escape(f"version {v}, in use for {scopes}") for v, scopes in zip(in_use["version"], in_use["in use for"])],
            hovertemplate="%{customdata}<extra></extra>",
        ))
    figure.update_layout(
        title={"text": html.escape(f"{model}: MAP of each version by the TRAIN labels it was trained on"),
               "font": {"size": 15}},
        xaxis_title="labels (TRAIN pairs)", yaxis_title="MAP", template="plotly_white", height=420,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return figure


def indented_tree(bracket: str) -> str:
    """A model's tree (bracket notation, as ``Explanation.trees`` holds it) one constituent a line."""
    return Tree.from_bracket(bracket).to_indented()

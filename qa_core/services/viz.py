"""Plotly figures: explanations' word x word matrices and the Errors page's slices (word weights and
REL arcs are drawn as text, ``qa_core.services.text_views``).

Tokens sit on numeric axes with escaped tick labels: categorical axes would merge repeated words
("the" twice becomes one column) and plotly renders a subset of HTML in labels and hover text.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence

import pandas as pd
import plotly.graph_objects as go

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


def slice_bar_figure(slices: pd.DataFrame, by: str, metric: str = "AP") -> go.Figure:
    """Mean ``metric`` per slice value (one bar each, in the table's order), questions on hover."""
    names = _labels([str(value) for value in slices[by]])
    figure = go.Figure(
        go.Bar(
            x=names,
            y=slices[metric],
            customdata=slices["questions"],
            hovertemplate="%{x}<br>mean " + html.escape(metric) + ": %{y:.4f}<br>questions: %{customdata}<extra></extra>",
        )
    )
    figure.update_yaxes(title_text=f"mean {html.escape(metric)}", range=[0, 1])
    figure.update_xaxes(type="category", title_text=html.escape(by))
    figure.update_layout(
        title={"text": f"mean {html.escape(metric)} by {html.escape(by)}"},
        height=300,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return figure


def indented_tree(bracket: str) -> str:
    """A model's tree (bracket notation, as ``Explanation.trees`` holds it) one constituent a line."""
    return Tree.from_bracket(bracket).to_indented()

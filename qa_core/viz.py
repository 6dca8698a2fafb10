"""Plotly figures for explanations: word x word matrices and per-answer-word weights.

Tokens sit on numeric axes with escaped tick labels: categorical axes would merge repeated words
("the" twice becomes one column) and plotly renders a subset of HTML in labels and hover text.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import plotly.graph_objects as go

from qa_core.rankers.base import Explanation

CELL_PX = 28
MIN_HEIGHT_PX = 160


def _labels(tokens: Sequence[str]) -> list[str]:
    return [html.escape(token) for token in tokens]


def heatmap_figure(explanation: Explanation, matrix_name: str) -> go.Figure:
    """Question tokens (rows) x answer tokens (columns) of one named matrix, raw values on hover."""
    if matrix_name not in explanation.matrices:
        known = ", ".join(sorted(explanation.matrices)) or "none"
        raise KeyError(f"explanation has no matrix {matrix_name!r} (has: {known})")
    matrix = explanation.matrices[matrix_name]
    questions, answers = _labels(explanation.question_tokens), _labels(explanation.answer_tokens)
    hover = [[f"{q} × {a}" for a in answers] for q in questions]
    figure = go.Figure(
        go.Heatmap(
            z=matrix,
            x=list(range(len(answers))),
            y=list(range(len(questions))),
            text=hover,
            hovertemplate="%{text}<br>" + html.escape(matrix_name) + ": %{z:.4f}<extra></extra>",
            colorscale="Viridis",
            colorbar={"title": {"text": html.escape(matrix_name)}},
        )
    )
    figure.update_xaxes(tickvals=list(range(len(answers))), ticktext=answers, tickangle=-45, title_text="answer")
    figure.update_yaxes(
        tickvals=list(range(len(questions))), ticktext=questions, autorange="reversed", title_text="question"
    )
    figure.update_layout(
        title={"text": f"{html.escape(matrix_name)}: question words × answer words"},
        height=max(MIN_HEIGHT_PX, CELL_PX * len(questions) + 160),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return figure


def token_weights_figure(explanation: Explanation) -> go.Figure:
    """One row over the answer words; colour is the weight divided by this candidate's largest
    absolute weight (so every candidate uses the full scale), hover shows the raw value."""
    weights = [float(w) for w in explanation.answer_weights]
    answers = _labels(explanation.answer_tokens)
    largest = max((abs(w) for w in weights), default=0.0)
    scaled = [w / largest if largest > 0 else 0.0 for w in weights]
    signed = any(w < 0 for w in weights)
    kind = html.escape(explanation.weight_kind)
    figure = go.Figure(
        go.Heatmap(
            z=[scaled],
            x=list(range(len(answers))),
            y=[0],
            text=[[f"{a}<br>{kind}: {w:.4g}" for a, w in zip(answers, weights)]],
            hovertemplate="%{text}<extra></extra>",
            colorscale="RdBu" if signed else "Blues",
            zmin=-1.0 if signed else 0.0,
            zmax=1.0,
            colorbar={"title": {"text": "scaled"}},
        )
    )
    figure.update_xaxes(tickvals=list(range(len(answers))), ticktext=answers, tickangle=-45)
    figure.update_yaxes(showticklabels=False)
    figure.update_layout(
        title={"text": f"{kind} per answer word (scaled to this candidate's maximum)"},
        height=MIN_HEIGHT_PX + 60,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return figure

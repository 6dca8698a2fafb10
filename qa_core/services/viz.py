"""Plotly figures for explanations: word x word matrices and per-answer-word weights.

Tokens sit on numeric axes with escaped tick labels: categorical axes would merge repeated words
("the" twice becomes one column) and plotly renders a subset of HTML in labels and hover text.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from qa_core.rankers.base import Explanation
from qa_core.text.links import Link

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


def token_weights_figure(explanation: Explanation, side: str = "answer") -> go.Figure:
    """One row over the answer (or question) words; colour is the weight divided by this text's
    largest absolute weight (so every candidate uses the full scale), hover shows the raw value.
    Where the model stopped reading a long answer, a line marks the cut."""
    if side == "question":
        if explanation.question_weights is None:
            raise KeyError("this explanation has no question weights")
        weights, answers = [float(w) for w in explanation.question_weights], _labels(explanation.question_tokens)
    else:
        weights, answers = [float(w) for w in explanation.answer_weights], _labels(explanation.answer_tokens)
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
    if side == "answer" and explanation.answer_tokens_read is not None:
        figure.add_vline(
            x=explanation.answer_tokens_read - 0.5,
            line={"color": "#d62728", "dash": "dash"},
            annotation_text=f"the model reads no further ({explanation.answer_tokens_read} tokens)",
        )
    figure.update_layout(
        title={"text": f"{kind} per {side} word (scaled to this text's maximum)"},
        height=MIN_HEIGHT_PX + 60,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return figure


# ---------------------------------------------------------------------------------------------
# REL links as arcs between the question's and the answer's words

QUESTION_Y, ANSWER_Y = 1.0, 0.0
CHAR_WIDTH = 1.0  # x units per character: words are placed by their length, so they do not overlap
ARC_POINTS = 24
LEXICAL_COLOUR = "#1f77b4"
FOCUS_COLOURS = {"HUM": "#d62728", "LOC": "#2ca02c", "NUM": "#ff7f0e", "ENTY": "#9467bd", "DESC": "#8c564b",
                 "ABBR": "#e377c2"}


def _word_centres(tokens: Sequence[str]) -> list[float]:
    """x of each token's centre when the tokens are written in a row, one space apart."""
    centres, cursor = [], 0.0
    for token in tokens:
        width = max(len(token), 1) * CHAR_WIDTH
        centres.append(cursor + width / 2)
        cursor += width + CHAR_WIDTH
    return centres


def _span_centre(centres: Sequence[float], start: int, end: int) -> float:
    inside = centres[start : max(end, start + 1)]
    return sum(inside) / len(inside) if inside else 0.0


def _arc(x_from: float, x_to: float) -> tuple[list[float], list[float]]:
    """A cubic Bézier from a question word down to an answer word, vertical at both ends."""
    top, bottom = QUESTION_Y - 0.12, ANSWER_Y + 0.12
    middle = (top + bottom) / 2
    xs, ys = [], []
    for step in range(ARC_POINTS + 1):
        t = step / ARC_POINTS
        a, b, c, d = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t**2, t**3
        xs.append(a * x_from + b * x_from + c * x_to + d * x_to)
        ys.append(a * top + b * middle + c * middle + d * bottom)
    return xs, ys


def link_kind_name(kind: str) -> str:
    """Legend name of a link kind: lexical REL or REL-FOCUS-<class>."""
    return "REL (shared lemma)" if kind == "REL" else f"{kind} (focus → entity)"


def link_colour(kind: str) -> str:
    if kind.startswith("REL-FOCUS-"):
        return FOCUS_COLOURS.get(kind.removeprefix("REL-FOCUS-"), "#7f7f7f")
    return LEXICAL_COLOUR


def arcs_figure(question_tokens: Sequence[str], answer_tokens: Sequence[str], links: Sequence[Link]) -> go.Figure:
    """Question words on the upper line, answer words on the lower, one curve per REL link between
    the linked spans, one colour and legend entry per link kind; hover names the words and label."""
    q_tokens = [token if token.strip() else "·" for token in question_tokens]
    a_tokens = [token if token.strip() else "·" for token in answer_tokens]
    q_x, a_x = _word_centres(q_tokens), _word_centres(a_tokens)
    figure = go.Figure()
    for tokens, xs, y, name in ((q_tokens, q_x, QUESTION_Y, "question"), (a_tokens, a_x, ANSWER_Y, "answer")):
        figure.add_trace(
            go.Scatter(
                x=xs, y=[y] * len(xs), mode="text", text=_labels(tokens), textfont={"size": 13},
                hovertemplate=f"{name}: %{{text}}<extra></extra>", showlegend=False,
            )
        )
    by_kind: dict[str, list[Link]] = {}
    for link in links:
        by_kind.setdefault(link.kind, []).append(link)
    for kind, kind_links in sorted(by_kind.items(), key=lambda item: (item[0] != "REL", item[0])):
        xs: list[float | None] = []
        ys: list[float | None] = []
        hover: list[str | None] = []
        for link in kind_links:
            x_from = _span_centre(q_x, link.q_start, link.q_end)
            x_to = _span_centre(a_x, link.a_start, link.a_end)
            arc_x, arc_y = _arc(x_from, x_to)
            words = (
                f"{' '.join(question_tokens[link.q_start : link.q_end])} → "
                f"{' '.join(answer_tokens[link.a_start : link.a_end])}"
            )
            text = html.escape(f"{words} · {kind}" + (f" · {link.label}" if link.label else ""))
            xs += [*arc_x, None]
            ys += [*arc_y, None]
            hover += [text] * len(arc_x) + [None]
        figure.add_trace(
            go.Scatter(
                x=xs, y=ys, mode="lines", name=html.escape(link_kind_name(kind)), legendgroup=kind,
                line={"color": link_colour(kind), "width": 2}, text=hover, hovertemplate="%{text}<extra></extra>",
            )
        )
    width = max([0.0, *q_x, *a_x]) + 2 * CHAR_WIDTH
    figure.update_xaxes(visible=False, range=[-CHAR_WIDTH, width])
    figure.update_yaxes(
        range=[ANSWER_Y - 0.25, QUESTION_Y + 0.25], tickvals=[ANSWER_Y, QUESTION_Y], ticktext=["answer", "question"],
        showgrid=False, zeroline=False,
    )
    count = len(links)
    title = f"REL links: {count} between question and answer words" if count else "No REL links for this pair"
    figure.update_layout(
        title={"text": title}, height=260, margin={"l": 10, "r": 10, "t": 50, "b": 10}, showlegend=True,
        legend={"orientation": "h", "y": -0.05}, plot_bgcolor="white",
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

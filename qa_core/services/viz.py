"""Plotly figures for explanations: word x word matrices and per-answer-word weights.

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
from qa_core.text.links import Link

CELL_PX = 28
MIN_HEIGHT_PX = 160
LINE_PX = 36  # one wrapped line of words in a weights figure
WRAP_WORDS = 20  # words per line of a weights figure
MATRIX_MAX_COLUMNS = 40  # longer answers go down the rows of a matrix figure


def _labels(tokens: Iterable[str]) -> list[str]:
    return [html.escape(token) for token in tokens]


def heatmap_figure(explanation: Explanation, matrix_name: str) -> go.Figure:
    """Question tokens x answer tokens of one named matrix, raw values on hover. A long answer (more
    than ``MATRIX_MAX_COLUMNS`` tokens) goes down the rows instead, so every word keeps a readable
    cell and the figure grows in height (the page scrolls) rather than squeezing the columns."""
    if matrix_name not in explanation.matrices:
        known = ", ".join(sorted(explanation.matrices)) or "none"
        raise KeyError(f"explanation has no matrix {matrix_name!r} (has: {known})")
    matrix = explanation.matrices[matrix_name]
    questions, answers = _labels(explanation.question_tokens), _labels(explanation.answer_tokens)
    hover = [[f"{q} × {a}" for a in answers] for q in questions]
    transposed = len(answers) > MATRIX_MAX_COLUMNS
    if transposed:
        matrix = [list(column) for column in zip(*matrix)] if matrix else []
        hover = [list(column) for column in zip(*hover)] if hover else []
    rows, columns = (answers, questions) if transposed else (questions, answers)
    row_title, column_title = ("answer", "question") if transposed else ("question", "answer")
    figure = go.Figure(
        go.Heatmap(
            z=matrix,
            x=list(range(len(columns))),
            y=list(range(len(rows))),
            text=hover,
            hovertemplate="%{text}<br>" + html.escape(matrix_name) + ": %{z:.4f}<extra></extra>",
            colorscale="Viridis",
            colorbar={"title": {"text": html.escape(matrix_name)}},
        )
    )
    figure.update_xaxes(tickvals=list(range(len(columns))), ticktext=columns, tickangle=-45, title_text=column_title)
    figure.update_yaxes(tickvals=list(range(len(rows))), ticktext=rows, autorange="reversed", title_text=row_title)
    figure.update_layout(
        title={"text": f"{html.escape(matrix_name)}: question words × answer words"},
        height=max(MIN_HEIGHT_PX, CELL_PX * len(rows) + 160),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return figure


def token_weights_figure(explanation: Explanation, side: str = "answer") -> go.Figure:
    """The answer's (or question's) words as text, each on a cell coloured by its weight divided by
    this text's largest absolute weight (so every candidate uses the full scale); the raw value is on
    hover. Words wrap onto lines of ``WRAP_WORDS``, so a 150-word answer stays readable. Words past
    the point where the model stopped reading are left grey, and the title says so."""
    if side == "question":
        if explanation.question_weights is None:
            raise KeyError("this explanation has no question weights")
        weights, tokens = [float(w) for w in explanation.question_weights], explanation.question_tokens
    else:
        weights, tokens = [float(w) for w in explanation.answer_weights], explanation.answer_tokens
    read = len(tokens) if side == "question" or explanation.answer_tokens_read is None else explanation.answer_tokens_read
    largest = max((abs(w) for w in weights[:read]), default=0.0)
    scaled = [(w / largest if largest > 0 else 0.0) if i < read else None for i, w in enumerate(weights)]
    signed = any(w < 0 for w in weights)
    kind = html.escape(explanation.weight_kind)
    lines = max(1, math.ceil(len(tokens) / WRAP_WORDS))

    def grid(values: Sequence, fill: object) -> list[list]:
        padded = list(values) + [fill] * (lines * WRAP_WORDS - len(values))
        return [padded[row * WRAP_WORDS : (row + 1) * WRAP_WORDS] for row in range(lines)]

    words = _labels(token if token.strip() else "·" for token in tokens)
    figure = go.Figure(
        go.Heatmap(
            z=grid(scaled, None),
            text=grid(words, ""),
            customdata=grid(weights, None),
            texttemplate="%{text}",
            hovertemplate="%{text}<br>" + kind + ": %{customdata:.4g}<extra></extra>",
            colorscale="RdBu" if signed else "Blues",
            zmin=-1.0 if signed else 0.0,
            zmax=1.0,
            xgap=2,
            ygap=2,
            colorbar={"title": {"text": "scaled"}},
        )
    )
    figure.update_xaxes(visible=False)
    figure.update_yaxes(visible=False, autorange="reversed")
    cut = "" if read == len(tokens) else f"; the model reads the first {read} tokens, grey words were not read"
    figure.update_layout(
        title={"text": f"{kind} per {side} word (scaled to this text's maximum{cut})"},
        height=MIN_HEIGHT_PX + LINE_PX * lines,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="#eeeeee",
    )
    return figure


# ---------------------------------------------------------------------------------------------
# REL links as arcs between the question's and the answer's words

QUESTION_Y, ANSWER_Y = 1.0, 0.0
CHAR_WIDTH = 1.0  # x units per character: words are placed by their length, so they do not overlap
ARC_POINTS = 24
ARC_MAX_WORDS = 40  # longer texts show their linked words in context and summarise the rest
ARC_CONTEXT = 2  # words kept on each side of a linked word in a long text
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


def _span_centre(centres: dict[int, float], start: int, end: int) -> float:
    inside = [centres[i] for i in range(start, max(end, start + 1)) if i in centres]
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


def _line(tokens: Sequence[str], linked: set[int]) -> tuple[list[str], dict[int, float]]:
    """The words drawn on one line and the x of each drawn token. A text longer than
    ``ARC_MAX_WORDS`` keeps its linked words with ``ARC_CONTEXT`` neighbours each and shows every
    other run as "…(n)", so a 150-word answer stays legible."""
    keep = set(range(len(tokens)))
    if len(tokens) > ARC_MAX_WORDS:
        keep = {j for i in linked for j in range(i - ARC_CONTEXT, i + ARC_CONTEXT + 1) if 0 <= j < len(tokens)}
    words: list[str] = []
    owners: list[int | None] = []
    hidden = 0
    for i, token in enumerate([*tokens, None]):
        if token is not None and i not in keep:
            hidden += 1
            continue
        if hidden:
            words.append(f"…({hidden})")
            owners.append(None)
            hidden = 0
        if token is not None:
            words.append(token if token.strip() else "·")
            owners.append(i)
    centres = _word_centres(words)
    return words, {owner: x for owner, x in zip(owners, centres) if owner is not None}


def _line_width(words: Sequence[str]) -> float:
    return sum(max(len(word), 1) * CHAR_WIDTH + CHAR_WIDTH for word in words)


def arcs_figure(question_tokens: Sequence[str], answer_tokens: Sequence[str], links: Sequence[Link]) -> go.Figure:
    """Question words on the upper line, answer words on the lower, one curve per REL link between
    the linked spans, one colour and legend entry per link kind; hover names the words and label."""
    q_linked = {i for link in links for i in range(link.q_start, max(link.q_end, link.q_start + 1))}
    a_linked = {i for link in links for i in range(link.a_start, max(link.a_end, link.a_start + 1))}
    q_words, q_at = _line(question_tokens, q_linked)
    a_words, a_at = _line(answer_tokens, a_linked)
    figure = go.Figure()
    for words, y, name in ((q_words, QUESTION_Y, "question"), (a_words, ANSWER_Y, "answer")):
        figure.add_trace(
            go.Scatter(
                x=_word_centres(words), y=[y] * len(words), mode="text", text=_labels(words), textfont={"size": 13},
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
            x_from = _span_centre(q_at, link.q_start, link.q_end)
            x_to = _span_centre(a_at, link.a_start, link.a_end)
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
    width = max(_line_width(q_words), _line_width(a_words)) + CHAR_WIDTH
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


def indented_tree(bracket: str) -> str:
    """A model's tree (bracket notation, as ``Explanation.trees`` holds it) one constituent a line."""
    return Tree.from_bracket(bracket).to_indented()

"""Plotly figures of the agreement dashboard. Names come from people and question classes: they
are HTML-escaped, since plotly renders a subset of HTML in labels and hover text."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from qa_core.services.labeling.dashboard import Dashboard

HEIGHT_PX = 320


def _names(values) -> list[str]:
    return [html.escape(str(value)) for value in values]


def _bar(x, y, title: str, axis: str, text=None) -> go.Figure:
    figure = go.Figure(go.Bar(x=_names(x), y=list(y), text=text, textposition="auto"))
    figure.update_layout(title=title, yaxis_title=axis, height=HEIGHT_PX, margin={"t": 50, "b": 40, "l": 50, "r": 10})
    return figure


def dashboard_figures(dashboard: Dashboard) -> dict[str, go.Figure]:
    """The dashboard's charts by title; a table with nothing measured (no rows, or no pair shared,
    no judgement timed: its annotators are listed with 0) has no chart."""
    figures = {}
    if dashboard.bias["shared pairs"].any():
        bias = dashboard.bias
        figures["bias"] = _bar(
            bias["annotator"], bias["bias"], "Bias per annotator (mean grade − consensus)", "grades",
            [f"n={n}" for n in bias["shared pairs"]],
        )
    if not dashboard.by_class.empty:
        by_class = dashboard.by_class
        figures["by_class"] = _bar(
            by_class["question class"], by_class["disagreement rate"], "Disagreement per question class",
            "share of shared pairs", [f"{d}/{n}" for d, n in zip(by_class["disagreements"], by_class["shared pairs"])],
        )
    if dashboard.timing["judgements"].any():
        timing = dashboard.timing
        figures["timing"] = _bar(
            timing["annotator"], timing["median s"], "Seconds per judgement (median)", "seconds",
            [f"n={n}" for n in timing["judgements"]],
        )
    return figures

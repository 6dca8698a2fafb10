"""The explainer picker shown above a candidate's heatmap (Ask, Compare)."""

from __future__ import annotations

import streamlit as st

from qa_core.services import explaining, ranking


def explainable(result: ranking.Ranking) -> bool:
    """Whether the model declares any explanation part (a stored run declares none: it is a static
    ranking, and its ``explain`` says why in one sentence)."""
    return bool(result.ranker.capabilities.explains)


def pick_explainer(result: ranking.Ranking, key: str) -> str | None:
    """The explainer the user picked for this candidate, the model's DEV-chosen default first; no
    picker and ``None`` (the default, whose refusal the page shows) for a model that cannot be explained."""
    if not explainable(result):
        return None
    choices = explaining.choices(result.ranker)
    return st.selectbox(
        "Explainer", list(choices), format_func=choices.__getitem__, key=f"{key}-explainer",
        help="Which attribution method colours the words; the line below the heatmap says how faithful "
             "it measured (deleting its top words against deleting random words).",
    )

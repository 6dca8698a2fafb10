"""The explainer picker shown above a candidate's heatmap (Ask, Compare)."""

from __future__ import annotations

import streamlit as st

from qa_core.services import explaining, ranking


def pick_explainer(result: ranking.Ranking, key: str) -> str:
    """The explainer the user picked for this candidate; the model's DEV-chosen default first."""
    choices = explaining.choices(result.ranker)
    return st.selectbox(
        "Explainer", list(choices), format_func=choices.__getitem__, key=f"{key}-explainer",
        help="Which attribution method colours the words; the line below the heatmap says how faithful "
             "it measured (deleting its top words against deleting random words).",
    )

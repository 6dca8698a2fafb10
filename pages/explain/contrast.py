"""The contrastive view on Ask: why candidate A is ranked above candidate B."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from pages.explain.picker import explainable, pick_explainer
from pages.render.markdown import as_markdown
from qa_core.services import contrastive, ranking, text_views
from qa_core.types import InputError


def show_contrast(result: ranking.Ranking, stored: Mapping[str, int], key: str) -> None:
    """Two candidates (by default the top-ranked wrong answer and the best-ranked right one below it), the words
    of each that move the score gap, and how faithful those words measured on this pair."""
    opened = st.query_params.get("view") == contrastive.VIEW
    with st.expander("Why is A ranked above B?", expanded=opened):
        pair = contrastive.default_pair(result, stored)
        ranks = [s.rank for s in result.scored]
        above, below = pair or (ranks[0], ranks[min(1, len(ranks) - 1)])
        if explainable(result):  # else no pickers: the refusal below says in one sentence why
            if pair is None:
                st.caption("No wrong answer is ranked above a right one here (by gold or stored labels); pick any two.")
            left, right = st.columns(2)
            above = left.selectbox("A (ranked higher)", ranks, index=ranks.index(above), key=f"{key}-contrast-a",
                                   format_func=lambda r: ranking.option_label(result.at(r), 50))
            below = right.selectbox("B (ranked lower)", ranks, index=ranks.index(below), key=f"{key}-contrast-b",
                                    format_func=lambda r: ranking.option_label(result.at(r), 50))
        explainer = pick_explainer(result, f"{key}-contrast")
        try:
            with st.spinner("Explaining both…"):
                shown = contrastive.contrast(result, above, below, explainer)
        except InputError as error:
            st.info(as_markdown(str(error)))
            return
        st.markdown(f"**#{shown.above.rank}** scores {shown.above.score:.4f}, **#{shown.below.rank}** "
                    f"{shown.below.score:.4f}: a gap of {shown.gap:.4f}.")
        kind = shown.above_explanation.weight_kind
        st.html(text_views.highlighted_text(
            shown.above_explanation.answer_tokens, shown.above_explanation.answer_weights, kind,
            read=shown.above_explanation.answer_tokens_read, title=f"A (#{shown.above.rank}): {kind} toward the gap"))
        st.html(text_views.highlighted_text(
            shown.below_explanation.answer_tokens, shown.below_explanation.answer_weights, kind,
            read=shown.below_explanation.answer_tokens_read,
            title=f"B (#{shown.below.rank}): minus its {kind} (red holds B up, against the gap)"))
        k = ranking.LIVE_FRACTION
        narrowed, random_narrowed = shown.narrowed()
        widened, random_widened = shown.widened()
        st.caption(
            f"Faithfulness on this pair: deleting A's top {k:.0%} words narrows the gap by {narrowed:.4f} "
            f"({k:.0%} random words of A: {random_narrowed:.4f}); deleting the {k:.0%} words that hold B up "
            f"widens it by {widened:.4f} (random words of B: {random_widened:.4f})."
            + (" This model's scores depend on the pool: an edit of A moves B's score too, which the gap here "
               "leaves out." if shown.pool_dependent else "")
        )

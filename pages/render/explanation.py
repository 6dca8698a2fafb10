"""One candidate explained (Ask, Compare): word weights, matrices, how far to trust them, REL arcs,
trees and a counterfactual edit, computed when the candidate is opened."""

from __future__ import annotations

import streamlit as st

from pages.explain.picker import pick_explainer
from pages.render.markdown import as_markdown
from qa_core.rankers.base import Explanation
from qa_core.services import ranking, text_views, trust, viz
from qa_core.types import InputError


def explain_candidate(result: ranking.Ranking, rank: int, dataset: str, key: str, text_shown: bool = False) -> None:
    """Everything the app shows of why ``result``'s candidate at ``rank`` scored as it did, computed
    when opened: the model's word weights and matrices, how far to trust them, its REL links as
    arcs, its trees, and a counterfactual edit. The answer's words are its text: the page shows the
    text only where no heatmap does (``text_shown``: the page showed it above)."""
    explainer = pick_explainer(result, key)
    try:
        with st.spinner("Explaining…"):
            explanation = result.explain(rank, explainer)
    except InputError as error:  # a stored run cannot be explained word by word; a service may fail
        if not text_shown:
            st.markdown(as_markdown(result.at(rank).candidate.text))
        st.info(as_markdown(str(error)))
        return
    show_explanation(explanation, key)
    show_trust(result, rank, dataset, explainer)
    show_arcs(explanation, key)
    if explanation.trees and st.toggle("Show the REL-tagged trees (as the model compared them)", key=f"{key}-trees"):
        for name, tree in explanation.trees.items():
            st.caption(as_markdown(name))
            st.code(viz.indented_tree(tree), language=None)
    show_counterfactual(result, rank, key, explainer)


def show_explanation(explanation: Explanation, key: str) -> None:
    """The model's word weights as highlighted text (the question's too, where the model weighs its
    words) and its word x word matrices."""
    for text in text_views.explanation_texts(explanation):
        st.html(text)
    for name in explanation.matrices:
        st.plotly_chart(viz.heatmap_figure(explanation, name), key=f"{key}-matrix-{name}")


def show_arcs(explanation: Explanation, key: str) -> None:
    """The explanation's REL links as arcs; past ``text_views.LINKS_SHOWN`` links the strongest,
    with a toggle for all of them."""
    figure = st.container()
    links = explanation.links
    show_all = len(links) > text_views.LINKS_SHOWN and st.toggle(f"Show all {len(links)} links", key=f"{key}-all-links")
    figure.markdown(text_views.arcs_html(explanation.question_tokens, explanation.answer_tokens, links,
                                         explanation.answer_weights, show_all=show_all), unsafe_allow_html=True)


def show_counterfactual(result: ranking.Ranking, rank: int, key: str, explainer: str) -> None:
    """Edit the candidate and score the edit against this ranking's scores; explain only the edit,
    by the explainer of the heatmap above (an edit scored under another one is scored again)."""
    with st.form(f"{key}-form", border=False):
        edited = st.text_area(
            "Edit this candidate and score it again", value=result.at(rank).candidate.text, key=f"{key}-text"
        )
        submitted = st.form_submit_button("Score edited text")
    if submitted:
        try:
            st.session_state[f"{key}-result"] = result.counterfactual(rank, edited, explainer)
        except InputError as error:
            st.session_state.pop(f"{key}-result", None)
            st.error(as_markdown(str(error)))
    outcome = st.session_state.get(f"{key}-result")
    if outcome is not None and outcome.explainer != explainer:  # the explainer was changed since
        try:
            outcome = st.session_state[f"{key}-result"] = result.counterfactual(rank, outcome.text, explainer)
        except InputError as error:  # a scoring service down meanwhile: one sentence
            st.session_state.pop(f"{key}-result", None)
            outcome = None
            st.error(as_markdown(str(error)))
    if outcome is not None:
        st.metric("Score of the edited text", f"{outcome.score:.4f}", delta=f"{outcome.delta:+.4f}")
        st.caption(f"Would rank #{outcome.rank} of {len(result)} (now #{rank}).")
        show_explanation(outcome.explanation, f"{key}-edited")


def show_trust(result: ranking.Ranking, rank: int, dataset: str, explainer: str | None = None) -> None:
    """How far to trust this heatmap: the model's measured faithfulness, and the same test live on
    this candidate (its score without its top-weighted words, and with only them, against random)."""
    measured = trust.measured_line(result.model, dataset, result.ranker.capabilities.trainable, explainer)
    if measured is not None:
        st.caption(as_markdown(measured))
    test = result.deletion_test(rank, explainer)
    k = ranking.LIVE_FRACTION
    st.caption(
        f"This candidate: score {test.score:.4f}; without its top {k:.0%} words "
        f"{test.score - test.comprehensiveness[k]:.4f} (without {k:.0%} random words: "
        f"{test.score - test.random_comprehensiveness[k]:.4f}); with only them "
        f"{test.score - test.sufficiency[k]:.4f} (only random words: {test.score - test.random_sufficiency[k]:.4f})."
    )

"""Errors: the words and word classes that carry the top attributions in wrong answers ranked above
right ones, across a slice of questions, with one click to the examples."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import pandas as pd
import streamlit as st

from pages.render.markdown import as_markdown
from qa_core.rankers.base import Ranker
from qa_core.services import slice_words
from qa_core.types import InputError, Question

WORST = 20
SLICE_KINDS = {f"the worst {WORST}": None, "a question class": "class", "a question length": "length"}


def show_slice_words(ranker: Ranker, questions: Sequence[Question], table: pd.DataFrame, dataset: str,
                     model: str, computed_for: Hashable) -> None:
    """The slice picker and, once asked for, its words, kept for the session until the slice, its
    labels or ``computed_for`` change (what else the words depend on: the model version in use, the
    label rule, the dataset import), so that words of an older version or rule are never shown."""
    st.subheader("Words behind wrong answers ranked above right ones")
    st.caption(f"For each question of the slice, every wrong answer ranked above the best-ranked right one is "
               f"explained by the model's default explainer; its top {slice_words.TOP_WORDS} words (positive "
               "weights) are counted by word, part of speech, entity type and whether the question has the word.")
    left, right = st.columns(2)
    kind = left.selectbox("Slice", list(SLICE_KINDS), key="words-slice")
    column = SLICE_KINDS[kind]
    value = None
    if column is not None:
        value = right.selectbox(kind.removeprefix("a ").capitalize(), sorted(table[column].astype(str).unique()),
                                key=f"words-{column}")
    chosen = slice_words.slice_questions(questions, table, column, value, worst=WORST if column is None else None)
    # The labels too: under the training-label rule a new label turns an answer right or wrong.
    labelled = tuple((q.qid, tuple(c.label for c in q.candidates)) for q in chosen)
    cache_key = ("words", dataset, model, computed_for, kind, value, labelled)
    if st.session_state.get("words-key") != cache_key:
        offer = st.empty()  # emptied once clicked: the results are drawn without the button above them
        if not offer.button(f"Find the words ({len(chosen)} questions)", key="words-run"):
            return
        offer.empty()
        try:
            with st.spinner("Explaining the wrong answers ranked above right ones…"):
                st.session_state["words-found"] = slice_words.examples(ranker, chosen, dataset, model)
        except InputError as error:  # a stored run cannot be explained word by word; a service may fail
            st.info(as_markdown(str(error)))
            return
        st.session_state["words-key"] = cache_key
    found: pd.DataFrame = st.session_state["words-found"]
    if found.empty:
        st.info("No wrong answer is ranked above a right one in this slice.")
        return
    st.caption(f"{len(found)} top words from {found[['qid', 'doc_id']].drop_duplicates().shape[0]} wrong answers "
               f"of {found['qid'].nunique()} questions. Pick a row to see its examples.")
    for tab, (name, by) in zip(st.tabs(list(slice_words.DESCRIPTIONS)), slice_words.DESCRIPTIONS.items()):
        with tab:
            counted = slice_words.counts(found, by)
            picked = st.dataframe(counted, hide_index=True, on_select="rerun", selection_mode="single-row",
                                  key=f"words-counts-{by}")
            rows = picked.selection.rows if picked is not None else []
            if rows:
                shown = found[found[by].astype(str) == str(counted[by].iloc[rows[0]])]
                st.markdown(as_markdown(f"{len(shown)} examples where the {name} is "
                                                  f"{counted[by].iloc[rows[0]]}:"))
                st.dataframe(
                    shown[["ask", "qid", "rank", "word", "weight", "answer", "question"]], hide_index=True,
                    column_config={"ask": st.column_config.LinkColumn("open", display_text="why A > B", width="small"),
                                   "answer": st.column_config.TextColumn("answer", width="large")},
                    key=f"words-examples-{by}",
                )

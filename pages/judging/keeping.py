"""Ask's "Keep this question" (issue 37): the typed question and the BM25 pool shown become a
question of the dataset (``qa_core.services.keep``), in the split picked (``explore`` unless
another is chosen); from then on the pool on screen is judged on the kept question."""

from __future__ import annotations

import streamlit as st

from pages.common.signin import current_actor
from pages.render.markdown import as_markdown
from qa_core.access import Permission
from qa_core.services import keep
from qa_core.types import InputError

KEEP_NOTICE = "keep_notice"


def keep_now(store, state: dict, split: str) -> None:
    """Button callback: keep the question, then judge its pool as the kept question's."""
    try:
        kept = keep.keep_question(store, state["dataset"], state["ranking"], split, actor=current_actor())
    except InputError as error:  # AccessDenied is one
        st.session_state[KEEP_NOTICE] = ("error", str(error))
        return
    state["ranking"] = keep.as_kept(state["ranking"], kept)
    st.session_state[KEEP_NOTICE] = ("success", keep.describe(kept, state["dataset"]))


def keep_panel(store, state: dict) -> None:
    """The split and the button for a typed question, and what the last keep did."""
    notice = st.session_state.pop(KEEP_NOTICE, None)
    if notice is not None:
        getattr(st, notice[0])(as_markdown(notice[1]))
    if state["ranking"].qid is not None or not current_actor().may(Permission.IMPORT):
        return
    left, right = st.columns([1, 3], vertical_alignment="bottom")
    split = left.selectbox("Keep in split", keep.keep_splits(store, state["dataset"]), key="keep_split",
                           help="explore: a split no reported metric reads; TEST only when you choose it")
    right.button("Keep this question", key="keep", on_click=keep_now, args=(store, state, split),
                 help="add this question and the candidates shown (with their first-stage ranks) to the dataset, "
                      "to judge, rank, compare and train on like any other")
    if split == "test":
        left.caption("Kept in TEST, it joins the questions every reported TEST metric is computed on.")

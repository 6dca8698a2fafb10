"""The Ask page's view of a dataset's collection: its search index being built in the background
(``qa_core.services.index_builds``) with a progress bar that follows it.

A package rather than ``pages/collection.py``: Streamlit lists every ``.py`` file in ``pages/`` as
a page in the sidebar.
"""

from __future__ import annotations

import streamlit as st

from db.store import Store
from qa_core.services import index_builds, workbench

POLL_SECONDS = 1.0


def index_progress(store: Store, dataset: str) -> None:
    """While the dataset's index is built (here or by another server), a progress bar refreshed
    every second, alone (a fragment); when the build ends, the page reruns once. A failed build is said."""
    state = index_builds.build_state(store, dataset)
    if state.status == "building":
        _follow_build(store, dataset)
    elif state.status == "failed":
        st.error(workbench.as_markdown(f"The search index of dataset {dataset} could not be built: {state.error}. "
                                      "The next typed question tries again."))


@st.fragment(run_every=POLL_SECONDS)
def _follow_build(store: Store, dataset: str) -> None:
    state = index_builds.build_state(store, dataset)
    if state.status != "building":
        st.rerun()  # the whole page, which no longer polls
    st.progress(state.fraction, text=workbench.as_markdown(
        f"Building the search index of {dataset} for typed questions: {state.phase}"))
    st.caption("Dataset questions can be ranked meanwhile; a typed question is searched once the index is ready.")

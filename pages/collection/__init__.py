"""The Ask page's view of a dataset's collection: its search index being built in the background
(``qa_core.services.index_builds``) with a progress bar that follows it, and the option to rerank
the whole collection (``qa_core.services.whole_collection``).

A package rather than ``pages/collection.py``: Streamlit lists every ``.py`` file in ``pages/`` as
a page in the sidebar.
"""

from __future__ import annotations

import streamlit as st

from pages.render.markdown import as_markdown
from qa_core.services import index_builds, whole_collection
from qa_core.services.datasets import Store

POLL_SECONDS = 1.0


def index_progress(store: Store, dataset: str) -> None:
    """While the dataset's index is built (here or by another server), a progress bar refreshed
    every second, alone (a fragment); when the build ends, the page reruns once. A failed build is said."""
    state = index_builds.build_state(store, dataset)
    if state.status == "building":
        _follow_build(store, dataset)
    elif state.status == "failed":
        st.error(as_markdown(f"The search index of dataset {dataset} could not be built: {state.error}. "
                                      "The next typed question tries again."))


@st.fragment(run_every=POLL_SECONDS)
def _follow_build(store: Store, dataset: str) -> None:
    state = index_builds.build_state(store, dataset)
    if state.status != "building":
        st.rerun()  # the whole page, which no longer polls
    st.progress(state.fraction, text=as_markdown(
        f"Building the search index of {dataset} for typed questions: {state.phase}"))
    st.caption("Dataset questions can be ranked meanwhile; a typed question is searched once the index is ready.")


def whole_collection_toggle(store: Store, dataset: str) -> bool:
    """Whether a typed question's pool is the whole collection; offered only for a collection small
    enough (``whole_collection.offered_size``), else False without a widget."""
    size = whole_collection.offered_size(index_builds.ready_size(store, dataset))
    if size is None:
        return False
    return st.toggle(
        # No "rank" in the label: its help button is named after it, and tests click the button named "Rank".
        f"Score the whole collection ({size:,} sentences) with the model, not BM25's top candidates", key="whole",
        help=f"The model scores every unique sentence of the dataset, so a right answer BM25 misses can still be "
             f"found: up to {whole_collection.wait_estimate(size):.0f} s per question with SM-CNN on this machine. "
             "SM-CNN trained on WikiQA's own pools found far fewer right answers in its top 50 this way than BM25 "
             "(docs/benchmarks.md, Reranking the whole collection).",
    )

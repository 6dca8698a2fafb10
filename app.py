"""Rerank Lab landing page: where the app runs, which store it uses, what data and models it holds.

``streamlit run app.py``; the pages in ``pages/`` (Ask, Compare, Label, Train, Errors) appear in the sidebar.
"""

from __future__ import annotations

import streamlit as st

from pages import current_actor, open_store, page_summaries
from qa_core.data.demo import DEMO_NAME
from qa_core.services import workbench

st.set_page_config(page_title="Rerank Lab", layout="wide")


url, store = open_store(show_device=False)  # in team mode: the sign-in screen until signed in
st.title("Rerank Lab")
st.markdown(
    "A workbench for neural answer reranking: ask a question (or pick one from a dataset), get BM25 "
    "candidates or the question's own pool, rerank them with a baseline or a neural model, and see "
    "why: scores, rank changes against the first stage, word heatmaps and REL links."
)
for path, summary in page_summaries(current_actor()):
    st.page_link(path, label=summary)

st.caption(f"Running on: {workbench.device_label()} · Store: {workbench.as_markdown(workbench.masked_url(url))}")

st.subheader("Datasets")
datasets = workbench.datasets_overview(store)
if datasets.empty:
    st.info("No datasets yet. Import one with `python -m qa_core data import PATH --name NAME`.")
else:
    st.dataframe(datasets, hide_index=True)

st.subheader("Models")
st.markdown("Available: " + ", ".join(f"`{name}`" for name in workbench.model_names()))
models = workbench.models_overview(store)
if models.empty:
    st.info(f"No trained model registered yet. Train SM-CNN with `{workbench.train_command('smcnn', DEMO_NAME)}`.")
else:
    st.dataframe(models, hide_index=True)

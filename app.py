"""Rerank Lab's entry point: ``streamlit run app.py``.

In team mode the sign-in gate comes first; then the sidebar lists only the pages in ``pages/`` that
the user's role may open (``st.navigation``; a page's own check refuses the others anyway), starting
on the landing page below: where the app runs, which store it uses, what data and models it holds.
"""

from __future__ import annotations

import streamlit as st

from pages.common.signin import navigable_pages, open_store
from pages.render.markdown import as_markdown
from qa_core.data.demo import DEMO_NAME
from qa_core.services import candidate_pools, model_loading, retraining, store_setup

st.set_page_config(page_title="Rerank Lab", layout="wide")


pages = navigable_pages()  # in team mode: the sign-in screen until signed in


def landing() -> None:
    url, store = open_store(show_device=False)
    st.title("Rerank Lab")
    st.markdown(
        "A workbench for neural answer reranking: ask a question (or pick one from a dataset), get BM25 "
        "candidates or the question's own pool, rerank them with a baseline or a neural model, and see "
        "why: scores, rank changes against the first stage, word heatmaps and REL links."
    )
    for path, summary in pages:  # the page's name is the link; what it does wraps beside it
        name, _, does = summary.partition(": ")
        link, text = st.columns([1, 7], vertical_alignment="center")
        link.page_link(path, label=name)
        text.markdown(as_markdown(does))

    st.caption(f"Running on: {store_setup.device_label()} · Store: {as_markdown(store_setup.masked_url(url))}")

    st.subheader("Datasets")
    datasets = candidate_pools.datasets_overview(store)
    if datasets.empty:
        st.info("No datasets yet. Import one with `python -m qa_core data import PATH --name NAME`.")
    else:
        st.dataframe(datasets, hide_index=True)

    st.subheader("Models")
    st.markdown("Available: " + ", ".join(f"`{name}`" for name in model_loading.model_names()))
    models = model_loading.models_overview(store)
    if models.empty:
        st.info(f"No trained model registered yet. Train SM-CNN with `{model_loading.train_command('smcnn', DEMO_NAME)}`.")
    else:
        st.dataframe(models, hide_index=True)
        st.caption(retraining.VERSIONS_NOTE)


st.navigation([st.Page(landing, title="Rerank Lab", default=True)] + [st.Page(path) for path, _ in pages]).run()

"""Ask: rank candidates for a typed or a dataset question with any model, and see why.

Widgets and layout only; the work is in ``qa_core.workbench`` and ``qa_core.viz``. Data text is
shown through ``st.dataframe`` or escaped markdown, never as HTML.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st
from sqlalchemy.exc import SQLAlchemyError

from qa_core import config, viz, workbench
from qa_core.types import InputError, NotTrainedError

TYPED, PICKED = "Type a question", "Pick a dataset question"
EXPLAINED = 5  # candidates with a heatmap: explaining is a backward pass each for neural models
RESULT_KEY = "ask_result"

st.set_page_config(page_title="Ask · Rerank Lab", layout="wide")


@st.cache_resource(show_spinner="Opening the store…")
def get_store(url: str):
    """One store per URL for the whole server; the demo corpus is imported into an empty one."""
    store = workbench.open_store(url)
    workbench.ensure_demo(store)
    return store


@st.cache_resource(show_spinner="Loading the model…")
def get_ranker(_store, url: str, model: str, dataset: str, model_version: str | None, dataset_version: str):
    """Rankers are shared by all sessions; a new model version or a re-import loads a new one."""
    return workbench.load_ranker(_store, model, fit_on=dataset)


@st.cache_resource(show_spinner="Loading the dataset…")
def get_questions(_store, url: str, dataset: str, dataset_version: str):
    return workbench.dataset_questions(_store, dataset)


st.title("Ask")
url = config.database_url()
st.caption(f"Running on: {workbench.device_label()}")
try:
    store = get_store(url)
except (InputError, SQLAlchemyError) as error:
    st.error(workbench.as_markdown(f"Cannot open the store at {workbench.masked_url(url)}: {error}"))
    st.stop()

datasets = store.dataset_names()
if not datasets:
    st.info("No datasets in the store. Import one with `python -m qa_core data import PATH --name NAME`.")
    st.stop()

left, right = st.columns(2)
dataset = left.selectbox("Dataset", datasets, key="dataset")
model = right.selectbox("Model", workbench.model_names(store), key="model")
dataset_version = workbench.dataset_version(store, dataset)

ranker = None
try:
    ranker = get_ranker(store, url, model, dataset, workbench.model_version_key(store, model), dataset_version)
except NotTrainedError as error:
    st.info(workbench.as_markdown(str(error)))
    st.code(workbench.train_command(model, dataset), language="bash")
except InputError as error:
    st.error(workbench.as_markdown(str(error)))

source = st.radio("Question", [TYPED, PICKED], horizontal=True, key="source", label_visibility="collapsed")
if source == TYPED:
    typed = st.text_input("Your question", key="question", placeholder="e.g. who discovered penicillin")
    k = int(
        st.number_input(
            "BM25 candidates to rerank", min_value=1, max_value=1000, value=workbench.DEFAULT_CANDIDATES, key="k"
        )
    )
else:
    questions = get_questions(store, url, dataset, dataset_version)
    picked = st.selectbox(
        "Dataset question",
        range(len(questions)),
        format_func=lambda i: f"{questions[i].qid} [{questions[i].split}] {questions[i].text}",
        key="picked",
    )

if st.button("Rank", type="primary", disabled=ranker is None):
    st.session_state.pop(RESULT_KEY, None)
    try:
        if source == TYPED:
            question = workbench.check_question(typed)
            candidates = workbench.candidates_for_question(store, dataset, question, k=k)
        elif picked is None:
            raise InputError(f"dataset {dataset!r} has no questions to pick")
        else:
            question, candidates = questions[picked].text, questions[picked].candidates
        with st.spinner("Ranking…"):
            table = workbench.rank(ranker, question, candidates)
            explanations = [ranker.explain(question, text) for text in table["text"].head(EXPLAINED)]
        st.session_state[RESULT_KEY] = {
            "question": question,
            "model": model,
            "dataset": dataset,
            "table": table,
            "explanations": explanations,
        }
    except (InputError, NotTrainedError) as error:
        st.error(workbench.as_markdown(str(error)))

result = st.session_state.get(RESULT_KEY)
if result is not None:
    table = result["table"]
    st.subheader("Ranked candidates")
    st.markdown(
        f"**{workbench.as_markdown(result['model'])}** on **{workbench.as_markdown(result['dataset'])}** · "
        f"{len(table)} candidates · question: {workbench.as_markdown(result['question'])}"
    )
    st.dataframe(
        table.drop(columns=["doc_id"]),
        hide_index=True,
        column_config={
            "rank": st.column_config.NumberColumn("rank", width="small"),
            "score": st.column_config.NumberColumn("score", format="%.4f"),
            "first_stage_rank": st.column_config.NumberColumn("first-stage rank", width="small"),
            "rank_change": st.column_config.NumberColumn("rank change", help="first-stage rank − rank", format="%+d"),
            "gold_label": st.column_config.NumberColumn("gold label", width="small"),
            "text": st.column_config.TextColumn("candidate", width="large"),
        },
        key="ranked",
    )
    st.subheader("Why: top candidates")
    for row, explanation in zip(table.head(EXPLAINED).itertuples(), result["explanations"]):
        gold = "" if pd.isna(row.gold_label) else f" · gold {row.gold_label}"
        with st.expander(f"#{row.rank} · score {row.score:.4f}{gold}", expanded=row.rank == 1):
            st.markdown(workbench.as_markdown(row.text))
            for name in explanation.matrices:
                st.plotly_chart(viz.heatmap_figure(explanation, name), key=f"matrix-{row.rank}-{name}")
            st.plotly_chart(viz.token_weights_figure(explanation), key=f"weights-{row.rank}")
            links = workbench.links_table(explanation)
            if links.empty:
                st.caption("No REL links: the question and this answer share no content lemma.")
            else:
                st.caption("REL links (shared lemmas)")
                st.dataframe(links, hide_index=True, key=f"links-{row.rank}")

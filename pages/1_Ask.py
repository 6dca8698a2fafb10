"""Ask: rank candidates for a typed or a dataset question with any model, and see why.

Widgets and layout only; the work is in ``qa_core.workbench`` and ``qa_core.viz``. Data text is
shown through ``st.dataframe``, ``st.code`` or escaped markdown, never as HTML. Query parameters
``?dataset=...&qid=...&model=...`` open one dataset question ranked (the Errors page links here).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages import PICKED, current_ranker, get_questions, load_ranker, open_store, question_input, require_datasets
from qa_core import viz, workbench
from qa_core.types import InputError, NotTrainedError

EXPLAINED = 5  # candidates with a heatmap: explaining is a backward pass each for neural models
RESULT_KEY, APPLIED_KEY, RUNS_KEY = "ask_result", "ask_applied_params", "ask_runs"
SHOWN_COLUMNS = ["rank", "score", "first_stage_rank", "rank_change", "gold_label", "stored_label", "text"]

st.set_page_config(page_title="Ask · Rerank Lab", layout="wide")


@st.cache_resource(show_spinner="Loading the question classifiers…")
def get_analyzer(_store, url: str, versions: tuple[str | None, ...]):
    return workbench.question_analyzer(_store)


st.title("Ask")
url, store = open_store()
datasets = require_datasets(store)
models = workbench.model_names(store)

# Query parameters (a link from the Errors page) preset the widgets once per distinct link.
params = {name: st.query_params[name] for name in workbench.ASK_PARAMS if name in st.query_params}
rank_now = False
if params and st.session_state.get(APPLIED_KEY) != params:
    st.session_state[APPLIED_KEY] = params
    named = params.get("dataset")
    pool = get_questions(store, url, named, workbench.dataset_version(store, named)) if named in datasets else []
    request = workbench.ask_request(params, datasets, models, pool)
    for problem in request.problems:
        st.warning(workbench.as_markdown(f"Link ignored in part: {problem}."))
    if request.dataset is not None:
        st.session_state["dataset"] = request.dataset
    if request.model is not None:
        st.session_state["model"] = request.model
    if request.question_index is not None:
        st.session_state["source"] = PICKED
        st.session_state["picked"] = request.question_index
        rank_now = True

left, right = st.columns(2)
dataset = left.selectbox("Dataset", datasets, key="dataset")
model = right.selectbox("Model", models, key="model")
dataset_version = workbench.dataset_version(store, dataset)

ranker = current_ranker(store, url, model, dataset)

chosen_question = question_input(store, url, dataset, dataset_version)

clicked = st.button("Rank", type="primary", disabled=ranker is None)
if (clicked or rank_now) and ranker is not None:
    st.session_state.pop(RESULT_KEY, None)
    try:
        question, candidates, qid = chosen_question()
        stored = workbench.stored_labels(store, dataset, qid)  # typed: every question's, keyed qid/doc_id
        analyzer = get_analyzer(store, url, workbench.classifier_version_key(store))
        with st.spinner("Ranking…"):
            table = workbench.rank(ranker, question, candidates, stored)
            top = list(table["text"].head(EXPLAINED))
            explanations = [ranker.explain(question, text) for text in top]
            links = [workbench.pair_links(question, text, analyzer) for text in top]
        st.session_state[RUNS_KEY] = st.session_state.get(RUNS_KEY, 0) + 1
        st.session_state[RESULT_KEY] = {
            "id": st.session_state[RUNS_KEY],
            "question": question,
            "model": model,
            "dataset": dataset,
            "analysis": workbench.analyse_question(analyzer, question),
            "table": table,
            "explanations": explanations,
            "links": links,
        }
    except (InputError, NotTrainedError) as error:
        st.error(workbench.as_markdown(str(error)))


def show_explanation(explanation, key: str) -> None:
    """The model's heatmaps: its word x word matrices and its per-answer-word weights."""
    for name in explanation.matrices:
        st.plotly_chart(viz.heatmap_figure(explanation, name), key=f"{key}-matrix-{name}")
    st.plotly_chart(viz.token_weights_figure(explanation), key=f"{key}-weights")


def show_counterfactual(result: dict, row, key: str) -> None:
    """Edit the candidate, score the edit against the same pool, explain only the edit."""
    with st.form(f"{key}-form", border=False):
        edited = st.text_area("Edit this candidate and score it again", value=row.text, key=f"{key}-text")
        submitted = st.form_submit_button("Score edited text")
    if submitted:
        try:
            ranker_used = load_ranker(store, url, result["model"], result["dataset"])
            pool = list(result["table"]["text"])
            st.session_state[f"{key}-result"] = workbench.counterfactual(
                ranker_used, result["question"], pool, row.rank - 1, edited
            )
        except (InputError, NotTrainedError) as error:
            st.session_state.pop(f"{key}-result", None)
            st.error(workbench.as_markdown(str(error)))
    outcome = st.session_state.get(f"{key}-result")
    if outcome is not None:
        st.metric("Score of the edited text", f"{outcome.score:.4f}", delta=f"{outcome.delta:+.4f}")
        st.caption(f"Would rank #{outcome.rank} of {len(result['table'])} (now #{row.rank}).")
        show_explanation(outcome.explanation, f"{key}-edited")


result = st.session_state.get(RESULT_KEY)
if result is not None:
    table = result["table"]
    analysis = result["analysis"]
    st.subheader("Ranked candidates")
    st.markdown(
        f"**{workbench.as_markdown(result['model'])}** on **{workbench.as_markdown(result['dataset'])}** · "
        f"{len(table)} candidates · question: {workbench.as_markdown(result['question'])}"
    )
    focus = workbench.as_markdown(analysis.focus_words) if analysis.focus_words else "none found"
    st.markdown(
        f"Question class: **{workbench.as_markdown(analysis.qclass or 'none')}** · focus: **{focus}** "
        f"· decided by: {workbench.as_markdown(analysis.source)}"
    )
    st.dataframe(
        table[SHOWN_COLUMNS],
        hide_index=True,
        column_config={
            "rank": st.column_config.NumberColumn("rank", width="small"),
            "score": st.column_config.NumberColumn("score", format="%.4f"),
            "first_stage_rank": st.column_config.NumberColumn("first-stage rank"),
            "rank_change": st.column_config.NumberColumn("rank change", help="first-stage rank − rank", format="%+d"),
            "gold_label": st.column_config.NumberColumn("gold label", width="small"),
            "stored_label": st.column_config.NumberColumn(
                "stored label", width="small", help="latest label in the store (Label page), if any"
            ),
            "text": st.column_config.TextColumn("candidate", width="large"),
        },
        key="ranked",
    )
    st.subheader("Why: top candidates")
    rows = table.head(EXPLAINED).itertuples()
    for row, explanation, pair in zip(rows, result["explanations"], result["links"]):
        key = f"r{result['id']}-{row.rank}"
        labels = "".join(
            f" · {name} {value}"
            for name, value in (("gold", row.gold_label), ("stored", row.stored_label))
            if not pd.isna(value)
        )
        with st.expander(f"#{row.rank} · score {row.score:.4f}{labels}", expanded=row.rank == 1):
            st.markdown(workbench.as_markdown(row.text))
            show_explanation(explanation, key)
            st.plotly_chart(viz.arcs_figure(pair.question_tokens, pair.answer_tokens, pair.links), key=f"{key}-arcs")
            if st.toggle("Show the REL-tagged trees", key=f"{key}-trees"):
                st.code(pair.question_tree, language=None)
                st.code(pair.answer_tree, language=None)
                for name, tree in explanation.trees.items():
                    st.caption(f"{workbench.as_markdown(name)} (as the model compared it)")
                    st.code(tree, language=None)
            show_counterfactual(result, row, key)

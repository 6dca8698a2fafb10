"""Ask: rank candidates for a typed or a dataset question with any model, and see why.

Widgets and layout only; the work is in ``qa_core.services.workbench`` and ``qa_core.services.viz``. Data text is
shown through ``st.dataframe``, ``st.code`` or escaped markdown, never as HTML. Query parameters
``?dataset=...&qid=...&model=...`` open one dataset question ranked (the Errors page links here).
"""

from __future__ import annotations

import streamlit as st

from pages import (
    PICKED,
    current_ranker,
    get_questions,
    open_store,
    pick_dataset,
    pick_model,
    question_input,
    require_datasets,
)
from qa_core.services import analysis, ranking, trust, viz, workbench
from qa_core.types import InputError, NotTrainedError

RESULT_KEY, APPLIED_KEY, RUNS_KEY = "ask_result", "ask_applied_params", "ask_runs"
SHOWN_COLUMNS = ["rank", "score", "first_stage_rank", "rank_change", "gold_label", "stored_label", "text"]

st.set_page_config(page_title="Ask · Rerank Lab", layout="wide")


@st.cache_resource(show_spinner="Loading the question classifiers…")
def get_analyzer(_store, url: str, versions: tuple[str | None, ...]):
    return analysis.question_analyzer(_store)


st.title("Ask")
url, store = open_store()
datasets = require_datasets(store)
models = workbench.model_names()

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
dataset = pick_dataset(left, datasets, key="dataset")
model = pick_model(right, store, dataset, key="model")
dataset_version = workbench.dataset_version(store, dataset)

ranker = current_ranker(store, url, model, dataset)

chosen_question = question_input(store, url, dataset, dataset_version)

clicked = st.button("Rank", type="primary", disabled=ranker is None)
if (clicked or rank_now) and ranker is not None:
    st.session_state.pop(RESULT_KEY, None)
    try:
        question, candidates, qid = chosen_question()
        with st.spinner("Ranking…"):
            result = ranking.rank_pool(ranker, question, candidates, model=model, qid=qid)
            # The class and focus the model read; for a model that reads none, the store's (said so).
            store_analysis = None
            if result.analysis is None:
                analyzer = get_analyzer(store, url, analysis.classifier_version_key(store))
                store_analysis = ranking.summarise(question, analyzer.analyse(question))
        st.session_state[RUNS_KEY] = st.session_state.get(RUNS_KEY, 0) + 1
        st.session_state[RESULT_KEY] = {
            "id": st.session_state[RUNS_KEY],
            "ranking": result,
            "dataset": dataset,
            "stored": workbench.stored_labels(store, dataset, qid),  # typed: every question's, keyed qid/doc_id
            "store_analysis": store_analysis,
        }
    except (InputError, NotTrainedError) as error:
        st.error(workbench.as_markdown(str(error)))


def show_explanation(explanation, key: str) -> None:
    """The model's heatmaps: its word x word matrices and its per-word weights (question side too,
    where the model has them)."""
    for name in explanation.matrices:
        st.plotly_chart(viz.heatmap_figure(explanation, name), key=f"{key}-matrix-{name}")
    if explanation.question_weights is not None:
        st.plotly_chart(viz.token_weights_figure(explanation, side="question"), key=f"{key}-question-weights")
    st.plotly_chart(viz.token_weights_figure(explanation), key=f"{key}-weights")


def show_counterfactual(result: ranking.Ranking, rank: int, key: str) -> None:
    """Edit the candidate and score the edit against this ranking's scores; explain only the edit."""
    with st.form(f"{key}-form", border=False):
        edited = st.text_area(
            "Edit this candidate and score it again", value=result.at(rank).candidate.text, key=f"{key}-text"
        )
        submitted = st.form_submit_button("Score edited text")
    if submitted:
        try:
            st.session_state[f"{key}-result"] = result.counterfactual(rank, edited)
        except InputError as error:
            st.session_state.pop(f"{key}-result", None)
            st.error(workbench.as_markdown(str(error)))
    outcome = st.session_state.get(f"{key}-result")
    if outcome is not None:
        st.metric("Score of the edited text", f"{outcome.score:.4f}", delta=f"{outcome.delta:+.4f}")
        st.caption(f"Would rank #{outcome.rank} of {len(result)} (now #{rank}).")
        show_explanation(outcome.explanation, f"{key}-edited")


def show_trust(result: ranking.Ranking, rank: int, dataset: str) -> None:
    """How far to trust this heatmap: the model's measured faithfulness, and the same test live on
    this candidate (its score without its top-weighted words, and with only them, against random)."""
    measured = trust.measured_line(result.model, dataset)
    if measured is not None:
        st.caption(workbench.as_markdown(measured))
    test = result.deletion_test(rank)
    k = ranking.LIVE_FRACTION
    st.caption(
        f"This candidate: score {test.score:.4f}; without its top {k:.0%} words "
        f"{test.score - test.comprehensiveness[k]:.4f} (without {k:.0%} random words: "
        f"{test.score - test.random_comprehensiveness[k]:.4f}); with only them "
        f"{test.score - test.sufficiency[k]:.4f} (only random words: {test.score - test.random_sufficiency[k]:.4f})."
    )


def analysis_line(summary: ranking.AnalysisSummary, read_by_model: bool) -> str:
    focus = workbench.as_markdown(summary.focus_words) if summary.focus_words else "none found"
    source = workbench.as_markdown(summary.source)
    who = "read by this model" if read_by_model else "the store's classifiers; this model does not read them"
    return f"Question class: **{workbench.as_markdown(summary.qclass or 'none')}** · focus: **{focus}** · decided by: {source} ({who})"


state = st.session_state.get(RESULT_KEY)
if state is not None:
    result: ranking.Ranking = state["ranking"]
    table = result.table(state["stored"])
    st.subheader("Ranked candidates")
    st.markdown(
        f"**{workbench.as_markdown(result.model)}** on **{workbench.as_markdown(state['dataset'])}** · "
        f"{len(table)} candidates · question: {workbench.as_markdown(result.question)}"
    )
    summary = result.summary() or state["store_analysis"]
    st.markdown(analysis_line(summary, read_by_model=result.analysis is not None))
    key = f"r{state['id']}"
    picked = st.dataframe(
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
        on_select="rerun",
        selection_mode="single-row",
        key=f"{key}-table",
    )
    st.subheader("Why")
    missed = ranking.missed_answers(result)
    only_missed = st.toggle(
        f"Only right answers ranked below a wrong one ({len(missed)})",
        key=f"{key}-missed",
        help="gold-relevant candidates with a gold-irrelevant candidate ranked above them",
    )
    ranks = missed if only_missed else [s.rank for s in result.scored]
    rows = picked.selection.rows if picked is not None else []
    if rows and st.session_state.get(f"{key}-applied") != rows[0]:  # a row clicked in the table opens it
        st.session_state[f"{key}-applied"] = rows[0]
        if rows[0] + 1 in ranks:
            st.session_state[f"{key}-open"] = rows[0] + 1
    if not ranks:
        st.info("No right answer is ranked below a wrong one here.")
    else:
        if st.session_state.get(f"{key}-open") not in ranks:  # e.g. the filter just hid it
            st.session_state[f"{key}-open"] = ranks[0]
        rank = st.selectbox(
            "Explain candidate",
            ranks,
            format_func=lambda r: ranking.option_label(result.at(r)),
            key=f"{key}-open",
        )
        scored = result.at(rank)
        labels = "".join(
            f" · {name} {value}"
            for name, value in (("gold", scored.candidate.label), ("stored", state["stored"].get(scored.candidate.doc_id)))
            if value is not None
        )
        st.markdown(f"**#{rank}** · score {scored.score:.4f}{labels}")
        st.markdown(workbench.as_markdown(scored.candidate.text))
        with st.spinner("Explaining…"):
            explanation = result.explain(rank)
        show_explanation(explanation, f"{key}-{rank}")
        show_trust(result, rank, state["dataset"])
        st.plotly_chart(
            viz.arcs_figure(explanation.question_tokens, explanation.answer_tokens, explanation.links),
            key=f"{key}-{rank}-arcs",
        )
        if explanation.trees and st.toggle("Show the REL-tagged trees (as the model compared them)", key=f"{key}-{rank}-trees"):
            for name, tree in explanation.trees.items():
                st.caption(workbench.as_markdown(name))
                st.code(tree, language=None)
        show_counterfactual(result, rank, f"{key}-{rank}")

"""Ask: rank candidates for a typed or a dataset question with any model, and see why.

Widgets and layout only; the work is in ``qa_core.services.candidate_pools``, ``model_loading``, ``ranking`` and ``viz``. Data text is
shown through ``st.dataframe``, ``st.code`` or escaped markdown, never as HTML. Query parameters
``?dataset=...&qid=...&model=...`` open one dataset question ranked (the Errors page links here).
"""

from __future__ import annotations

import streamlit as st

from pages.collection import index_progress
from pages.common.caches import current_ranker, get_questions
from pages.common.pickers import (
    blank_missing,
    pick_dataset,
    pick_model,
    preset_model,
    preset_question,
    question_input,
    require_datasets,
)
from pages.common.scripts import preload_elements
from pages.common.signin import open_store
from pages.explain.contrast import show_contrast
from pages.judging import install_keys, judge_panel, rerun_if_judged
from pages.judging.keeping import keep_panel
from pages.render.explanation import explain_candidate
from pages.render.links import ASK_PARAMS, ask_request
from pages.render.markdown import as_markdown
from qa_core.services import analysis, candidate_pools, index_builds, model_loading, ranking, whole_collection
from qa_core.types import InputError, NotTrainedError

RESULT_KEY, APPLIED_KEY, RUNS_KEY = "ask_result", "ask_applied_params", "ask_runs"
SHOWN_COLUMNS = ["rank", "score", "tied", "first_stage_rank", "rank_change", "gold_label", "stored_label", "text"]
FIRST_STAGE_COLUMNS = ("first_stage_rank", "rank_change")

st.set_page_config(page_title="Ask · Rerank Lab", layout="wide")


@st.cache_resource(show_spinner="Loading the question classifiers…")
def get_analyzer(_store, url: str, versions: tuple[str | None, ...]):
    return analysis.question_analyzer(_store)


st.title("Ask")
url, store = open_store()
datasets = require_datasets(store)
models = model_loading.model_names(store)  # a link may name a system too

# Query parameters (a link from the Errors page) preset the widgets once per distinct link.
params = {name: st.query_params[name] for name in ASK_PARAMS if name in st.query_params}
rank_now = False
if params and st.session_state.get(APPLIED_KEY) != params:
    st.session_state[APPLIED_KEY] = params
    named = params.get("dataset")
    named_version = candidate_pools.dataset_version(store, named) if named in datasets else None
    pool = get_questions(store, url, named, named_version) if named in datasets else []
    request = ask_request(params, datasets, models, pool)
    for problem in request.problems:
        st.warning(as_markdown(f"Link ignored in part: {problem}."))
    if request.dataset is not None:
        st.session_state["dataset"] = request.dataset
    if request.model is not None:
        preset_model("model", request.dataset or st.session_state.get("dataset"), request.model)
    if request.question_index is not None:
        preset_question(request.dataset, named_version, request.question_index)
        rank_now = True

left, right = st.columns(2)
dataset = pick_dataset(left, datasets, key="dataset", store=store)
model = pick_model(right, store, dataset, key="model")
dataset_version = candidate_pools.dataset_version(store, dataset)

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
            "store_analysis": store_analysis,
        }
    except index_builds.IndexBuilding as building:
        st.info(as_markdown(str(building)))
    except (InputError, NotTrainedError) as error:
        st.error(as_markdown(str(error)))
index_progress(store, dataset)


def analysis_line(summary: ranking.AnalysisSummary, read_by_model: bool) -> str:
    focus = as_markdown(summary.focus_words) if summary.focus_words else "none found"
    source = as_markdown(summary.source)
    who = "read by this model" if read_by_model else "the store's classifiers; this model does not read them"
    return f"Question class: **{as_markdown(summary.qclass or 'none')}** · focus: **{focus}** · decided by: {source} ({who})"


@st.fragment
def why(state: dict, key: str, rows: list[int], stored: dict[str, int]) -> None:
    """The open candidate's explanation. A fragment: opening another candidate, the filter, the trees
    toggle and a counterfactual edit rerun only this part, not the page with its ranked table (issue 16);
    ``rows`` is the table row last clicked (a click reruns the whole page), ``stored`` the labels the
    page's run read for the table. The open candidate is judged here (``judge_panel``)."""
    rerun_if_judged()
    st.subheader("Why")
    result: ranking.Ranking = state["ranking"]
    missed = ranking.missed_answers(result)
    only_missed = st.toggle(
        f"Only right answers ranked below a wrong one ({len(missed)})",
        key=f"{key}-missed",
        help="gold-relevant candidates with a gold-irrelevant candidate ranked above them",
    )
    ranks = missed if only_missed else [s.rank for s in result.scored]
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
            for name, value in (("gold", scored.candidate.label), ("stored", stored.get(scored.candidate.doc_id)))
            if value is not None
        )
        st.markdown(f"**#{rank}** · score {scored.score:.4f}{labels}")  # its text: the heatmap's words below
        judge_panel(store, state, result.qid, scored.candidate.doc_id)
        explain_candidate(result, rank, state["dataset"], f"{key}-{rank}")


state = st.session_state.get(RESULT_KEY)
if state is not None:
    result: ranking.Ranking = state["ranking"]
    # Read on every run, never kept with the result: a label written since Rank (on the Label page, by
    # another annotator, judged below) shows at once. A typed question's: every question's, keyed qid/doc_id.
    stored = candidate_pools.stored_labels(store, state["dataset"], result.qid)
    table = result.table(stored)
    st.subheader("Ranked candidates")
    st.markdown(
        f"**{as_markdown(result.model)}** on **{as_markdown(state['dataset'])}** · "
        f"{len(table)} candidates, {as_markdown(whole_collection.origin(store, state['dataset'], result.qid, [s.candidate for s in result.scored]))}"
        f" · question: {as_markdown(result.question)}"
    )
    summary = result.summary() or state["store_analysis"]
    st.markdown(analysis_line(summary, read_by_model=result.analysis is not None))
    if result.tied():
        st.caption(f"{result.tied()} of {len(table)} candidates share their score with another (marked tied): "
                   "their order is the tie rule's, doc id descending, as trec_eval orders them.")
    if result.pool_note() is not None:
        st.info(as_markdown(result.pool_note()))
    key = f"r{state['id']}"
    # A pool without a first stage (a dataset question's own candidates) has no first-stage columns to show.
    shown = [c for c in SHOWN_COLUMNS if not (c in FIRST_STAGE_COLUMNS and table[c].isna().all())]
    picked = st.dataframe(
        table[shown].assign(gold_label=blank_missing(table["gold_label"]),
                                    stored_label=blank_missing(table["stored_label"])),
        hide_index=True,
        column_config={
            "rank": st.column_config.NumberColumn("rank", width="small"),
            "score": st.column_config.NumberColumn("score", format="%.4f"),
            "tied": st.column_config.CheckboxColumn(
                "tied", width="small", help="another candidate has exactly this score: ties are ordered by doc id "
                "descending, as trec_eval orders them"
            ),
            "first_stage_rank": st.column_config.NumberColumn("first-stage rank"),
            "rank_change": st.column_config.NumberColumn("rank change", help="first-stage rank − rank", format="%+d"),
            "gold_label": st.column_config.TextColumn("gold label", width="small"),
            "stored_label": st.column_config.TextColumn(  # no width="small": it cut the header off
                "stored label", help="latest label in the store (Label page, or judged below), if any"
            ),
            "text": st.column_config.TextColumn("candidate", width="large"),
        },
        on_select="rerun",
        selection_mode="single-row",
        key=f"{key}-table",
    )
    keep_panel(store, state)
    why(state, key, picked.selection.rows if picked is not None else [], stored)
    show_contrast(result, stored, key)
    install_keys({})  # the judge panel's grade and undo keys
preload_elements("DataFrame", "PlotlyChart")  # the ranked table and the heatmaps, before the first Rank

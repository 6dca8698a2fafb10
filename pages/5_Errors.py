"""Errors: a model's per-question metrics on a dataset split, worst first, and slices of them.

Widgets and layout only; the work is in ``qa_core.services.errors``. Scores are cached per model version,
dataset import and split (labels are read on every run, so new labels show at once); metrics are
computed against the label rule chosen on the page (``qa_core.services.evaluation_labels``, default
gold, as Compare and the CLI); each worst question links to Ask with ``?dataset=...&qid=...&model=...``.
"""

from __future__ import annotations

import streamlit as st

from pages.common.caches import current_ranker, get_questions, split_run
from pages.common.pickers import (
    blank_missing,
    pick_clean,
    pick_dataset,
    pick_label_rule,
    pick_model,
    question_set,
    require_datasets,
)
from pages.common.signin import open_store
from pages.explain.slice_words import show_slice_words
from pages.render.links import ask_url
from pages.render.markdown import as_markdown
from qa_core.evaluation import qrels_from_questions
from qa_core.services import analysis, candidate_pools, contrastive, errors, model_loading, viz
from qa_core.services.datasets import splits as dataset_splits
from qa_core.services.evaluation_labels import describe, evaluation_labels
from qa_core.types import InputError

ALL_SPLITS = "all splits"
LINKED = 10  # worst questions listed as links to Ask under the table
NO_RIGHT = "no right candidate"  # a question no model can answer (errors.unanswerable)

st.set_page_config(page_title="Errors · Rerank Lab", layout="wide")


@st.cache_data(show_spinner="Analysing the questions…", max_entries=32)
def get_profiles(_store, _questions, url: str, dataset: str, dataset_version: str, split: str,
                 classifiers: tuple[str | None, ...]):
    return errors.question_profiles(_questions, analysis.question_analyzer(_store))


@st.cache_data(show_spinner="Measuring lexical overlap…", max_entries=32)
def get_overlaps(_questions, url: str, dataset: str, dataset_version: str, split: str):
    return errors.candidate_overlaps(_questions)


st.title("Errors")
url, store = open_store()
datasets = require_datasets(store)

left, middle, right = st.columns(3)
dataset = pick_dataset(left, datasets, key="dataset", store=store)
dataset_version = candidate_pools.dataset_version(store, dataset)
splits = dataset_splits(store, dataset)
split_options = [*splits, ALL_SPLITS]
split = middle.selectbox(  # keyed per dataset: another dataset's split never carries over
    "Split", split_options, index=split_options.index("test") if "test" in splits else 0, key=f"split-{dataset}"
)
model = pick_model(right, store, dataset, key="model")
left, right = st.columns([1, 2])
clean = pick_clean(left, key="clean")
rule = pick_label_rule(right, key="labels")

ranker = current_ranker(store, url, model, dataset)
if ranker is None:
    st.stop()

labels = evaluation_labels(store, dataset, rule, loaded=get_questions(store, url, dataset, dataset_version))
questions = labels.split(None if split == ALL_SPLITS else split)
if not questions:
    st.info(as_markdown(f"Dataset {dataset} has no questions in {split}."))
    st.stop()
try:
    run = split_run(store, url, model, dataset, split, questions)
except InputError as error:  # a scoring service that is down, slow or answers outside its contract
    st.error(as_markdown(str(error)))
    st.stop()
profiles = get_profiles(store, questions, url, dataset, dataset_version, split, analysis.classifier_version_key(store))
overlaps = get_overlaps(questions, url, dataset, dataset_version, split)
table = errors.error_table(run, qrels_from_questions(questions), profiles, overlaps, labels.sources, clean=clean)
if table.empty:
    st.info("No question here has labels to evaluate against" + (" (with a correct and a wrong candidate)." if clean else "."))
    st.stop()

metrics = list(errors.METRIC_COLUMNS.values())
columns = st.columns(len(metrics) + 1)
columns[0].metric("Questions", len(table))
for column, metric in zip(columns[1:], metrics):
    column.metric(f"mean {metric}", f"{table[metric].mean():.4f}")
st.caption(as_markdown(
    f"Means over {question_set(clean, len(table), split)} of {dataset}, "
    f"{model_loading.version_in_use(store, model, dataset)}."))
judged = errors.judgement_report(run, qrels_from_questions(questions), profiles, clean=clean)
if not judged.complete:  # unjudged candidates count as not relevant above: say how many, and what skipping them gives
    st.caption(as_markdown(judged.describe()))

st.subheader("Worst questions")
st.caption(
    f"Per-question values from ir-measures (trec_eval semantics). {describe(rule)} Overlap: the largest "
    "IDF-weighted share of the question's content words found in one of its correct answers (IDF over this "
    "split's candidates). Tied: candidates sharing their score with another of the question's."
)
st.caption(as_markdown(errors.ties(run, qrels_from_questions(questions), profiles, clean=clean).describe()))
unanswerable = errors.unanswerable(table)
if unanswerable.any():  # AP 0 for every model: listed last, so the list opens with what a model could get right
    st.caption(as_markdown(
        f"{unanswerable.sum()} of {len(table)} questions have no right candidate in the pool (AP 0 for every "
        f"model), listed last and marked \"{NO_RIGHT}\": {', '.join(table.loc[unanswerable, 'qid'].head(LINKED))}"
        + (", …" if unanswerable.sum() > LINKED else "") + "."))
shown = table.assign(
    ask=[ask_url(dataset, qid, model) for qid in table["qid"]],
    why=blank_missing(contrastive.contrast_links(table, dataset, model)),  # no wrong answer above a right one
    overlap=blank_missing(table["overlap"], "{:.2f}"),  # none without a correct answer
    pool=[NO_RIGHT if none else "" for none in unanswerable],
)
st.dataframe(
    shown,
    hide_index=True,
    column_config={
        "ask": st.column_config.LinkColumn("open", display_text="Ask", width="small"),
        "why": st.column_config.LinkColumn("contrast", display_text="why A > B", width="small",
                                           help="a wrong answer is ranked above a right one: open the contrastive view"),
        "question": st.column_config.TextColumn("question", width="medium"),  # large hid nDCG@10 and on at 1280 px
        "pool": st.column_config.TextColumn("pool", help="no right candidate: AP 0 for every model"),
        **{metric: st.column_config.NumberColumn(metric, format="%.3f") for metric in metrics},
        "overlap": st.column_config.TextColumn("overlap", alignment="right"),
        "overlap_bucket": "overlap bucket",
        "label_source": "label source",
        "tied": st.column_config.NumberColumn("tied", help="candidates sharing their score with another of this question's"),
        "unjudged": st.column_config.NumberColumn("unjudged", help="candidates without a judgement (not relevant above)"),
    },
    column_order=["ask", "why", "qid", "question", *(["pool"] if unanswerable.any() else []), *metrics, *(["unjudged"] if not judged.complete else []), "class", "length",
                  "overlap", "label_source", "correct", "tied"],
    key="worst",
)
with st.container(key="worst-links"):
    for row, none in zip(table.head(LINKED).itertuples(), unanswerable):
        st.page_link(
            "pages/1_Ask.py",
            label=as_markdown(f"{row.qid} · AP {row.AP:.3f} · {f'{NO_RIGHT} · ' if none else ''}{row.question}"),
            query_params=contrastive.ask_params(dataset, row.qid, model, row),
            icon=":material/search:",
        )

st.subheader("Slices")
tabs = st.tabs(list(errors.SLICES))
for tab, by in zip(tabs, errors.SLICES):
    with tab:
        slices = errors.slice_table(table, by)
        st.dataframe(
            slices,
            hide_index=True,
            column_config={metric: st.column_config.NumberColumn(metric, format="%.3f") for metric in metrics},
            key=f"slice-{by}",
        )
        st.plotly_chart(viz.slice_bar_figure(slices, by, table, errors.SLICES.get(by, by)), key=f"slice-chart-{by}")

show_slice_words(ranker, questions, table, dataset, model,
                 computed_for=(model_loading.current_version(store, model, dataset).key, rule, dataset_version))

"""Compare: two or three models on one question (aligned rankings, bump chart) or on a dataset split
(per-question deltas, win/tie/loss, paired tests, the questions where the models disagree).

Widgets and layout only; the work is in ``qa_core.services.compare`` and ``qa_core.services.workbench``. Data text is
shown through ``st.dataframe`` or escaped markdown, never as HTML.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages import current_ranker, get_questions, open_store, question_input, require_datasets
from qa_core.evaluation import METRICS
from qa_core.services import compare, workbench
from qa_core.types import InputError, NotTrainedError

ONE, SPLIT = "One question", "Whole split"
TOP = 10  # ranks shown side by side and in the chart
QUESTION_KEY, SPLIT_KEY = "compare_question_result", "compare_split_result"

st.set_page_config(page_title="Compare · Rerank Lab", layout="wide")


def ranked_list(table, top: int) -> str:
    """A model's top candidates as an escaped markdown list: score, ✓ for gold relevant, text."""
    lines = []
    for row in table.head(top).itertuples():
        gold = " ✓" if pd.notna(row.gold_label) and row.gold_label > 0 else ""
        lines.append(f"{row.rank}. `{row.score:.3f}`{gold} {workbench.as_markdown(row.text)}")
    return "\n".join(lines)


st.title("Compare")
url, store = open_store()
datasets = require_datasets(store)

left, right = st.columns([1, 2])
dataset = left.selectbox("Dataset", datasets, key="dataset")
names = workbench.model_names(store)
models = right.multiselect(
    "Models (the first is the reference)",
    names,
    default=names[:2],
    max_selections=compare.MAX_MODELS,
    key="models",
)
dataset_version = workbench.dataset_version(store, dataset)

rankers = {}
for model in models:
    ranker = current_ranker(store, url, model, dataset)
    if ranker is not None:
        rankers[model] = ranker
ready = len(rankers) == len(models) and compare.MIN_MODELS <= len(models) <= compare.MAX_MODELS
if len(models) < compare.MIN_MODELS:
    st.info("Choose two or three models to compare.")

view = st.radio("Compare on", [ONE, SPLIT], horizontal=True, key="view")

if view == ONE:
    chosen_question = question_input(store, url, dataset, dataset_version)
    if st.button("Compare", type="primary", disabled=not ready, key="compare_question"):
        st.session_state.pop(QUESTION_KEY, None)
        try:
            question, candidates, _ = chosen_question()
            with st.spinner("Ranking…"):
                st.session_state[QUESTION_KEY] = compare.compare_question(rankers, question, candidates)
        except (InputError, NotTrainedError) as error:
            st.error(workbench.as_markdown(str(error)))

    result = st.session_state.get(QUESTION_KEY)
    if result is not None:
        st.subheader("Rankings side by side")
        st.markdown(f"{len(result.ranks)} candidates · question: {workbench.as_markdown(result.question)}")
        for column, model in zip(st.columns(len(result.models)), result.models):
            column.markdown(f"**{workbench.as_markdown(model)}**")
            column.markdown(ranked_list(result.tables[model], TOP))
        st.plotly_chart(compare.bump_figure(result, top=TOP), key="bump")
        with st.expander("As tables: the top ranks side by side, and every candidate's rank per model"):
            st.dataframe(compare.aligned_lists(result, TOP), hide_index=True)
            st.dataframe(result.ranks, column_config={"text": st.column_config.TextColumn("candidate", width="large")})

else:
    questions = get_questions(store, url, dataset, dataset_version)
    splits = sorted({q.split for q in questions})
    left, middle, right = st.columns(3)
    split = left.selectbox("Split", splits, index=splits.index("test") if "test" in splits else 0, key="split")
    metric = middle.selectbox("Metric", METRICS, key="metric")
    clean = right.checkbox(
        "Clean questions only", key="clean", help="Only questions with a relevant and a non-relevant candidate"
    )
    if st.button("Compare on the split", type="primary", disabled=not ready, key="compare_split"):
        st.session_state.pop(SPLIT_KEY, None)
        try:
            with st.spinner("Scoring the split…"):
                chosen = [q for q in questions if q.split == split]
                st.session_state[SPLIT_KEY] = compare.compare_split(rankers, chosen, metric=metric, clean=clean)
        except (InputError, NotTrainedError) as error:
            st.error(workbench.as_markdown(str(error)))

    result = st.session_state.get(SPLIT_KEY)
    if result is not None:
        reference = result.models[0]
        st.subheader("Means")
        st.dataframe(result.means, column_config={m: st.column_config.NumberColumn(m, format="%.4f") for m in METRICS})
        st.subheader(f"Per question: {result.metric} against {reference}")
        st.caption(
            f"Δ = model − {reference} per question; a win is Δ > 0. Significance: scipy's paired t-test "
            "(ttest_rel) and Wilcoxon signed-rank test (wilcoxon, zero differences dropped), both "
            f"two-sided, over the {result.summaries[0].questions} questions"
            + (" with a relevant and a non-relevant candidate." if result.clean else " with gold labels.")
        )
        st.dataframe(compare.summary_table(result), hide_index=True, key="summary")
        left, right = st.columns(2)
        only = left.toggle("Only questions where the models disagree", value=True, key="only_disagreements")
        different_top1 = left.checkbox("… a different top-1 candidate", value=True, key="different_top1")
        threshold = right.slider(f"… or |Δ {result.metric}| above", 0.0, 1.0, 0.1, 0.05, key="threshold")
        table = compare.disagreements(result, threshold, different_top1) if only else result.per_question
        st.caption(f"{len(table)} of {len(result.per_question)} questions")
        st.dataframe(
            table,
            column_config={
                "question": st.column_config.TextColumn("question", width="large"),
                **{m: st.column_config.NumberColumn(m, format="%.4f") for m in result.models},
                **{
                    compare.delta_column(m): st.column_config.NumberColumn(compare.delta_column(m), format="%+.4f")
                    for m in result.models[1:]
                },
            },
            key="per_question",
        )

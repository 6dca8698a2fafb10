"""Compare: two or three models on one question (aligned rankings, bump chart) or on a dataset split:
means with bootstrap intervals, every pair's randomisation and t-tests (Holm), W/T/L and minimum
detectable difference, a sorted per-question delta chart and a metric scatter whose clicked
questions open in Ask, the questions where the models disagree most, seeds of one model against
another's, and "fuse these" (a ranx fusion tuned on DEV, kept in the store, then listed as a model).

Widgets and layout only; the work is in ``qa_core.services.compare`` and ``qa_core.services.candidate_pools``. Data text is
shown through ``st.dataframe``, ``st.table`` or escaped markdown, never as HTML of its own: the explanations' HTML
(``qa_core.services.text_views``) escapes every word.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.common.caches import current_ranker, get_questions, load_ranker, split_run
from pages.common.pickers import (
    pick_clean,
    pick_dataset,
    pick_label_rule,
    pick_models,
    question_input,
    question_set,
    require_datasets,
)
from pages.common.scripts import preload_elements
from pages.common.signin import current_actor, open_store
from pages.judging import install_keys, judge_panel, rerun_if_judged
from pages.render.explanation import explain_candidate
from pages.render.links import ask_url
from pages.render.markdown import as_markdown
from qa_core import config, fusion
from qa_core.evaluation import METRICS
from qa_core.services import candidate_pools, compare, model_loading, ranking, stored_runs
from qa_core.services.evaluation_labels import describe, evaluation_labels
from qa_core.types import InputError, NotTrainedError

ONE, SPLIT = "One question", "Whole split"
MODELS, SEEDS = "Models", "Seed runs"
TOP = 10  # ranks shown side by side and in the chart
LINKED = 5  # selected questions linked to Ask at once
QUESTION_KEY, SPLIT_KEY, FUSED_KEY = "compare_question_result", "compare_split_result", "compare_fused_message"
RUNS_KEY = "compare_runs"  # one-question comparisons made in this session: each one's id keys its widgets

st.set_page_config(page_title="Compare · Rerank Lab", layout="wide")


def not_current(shown: dict, dataset: str, version: str, what: str) -> bool:
    """Whether ``shown`` (a kept comparison) is of another dataset than the one chosen, or of an
    earlier import of it: then it is not shown (its rankings, explanations and runs are of that
    data, and fusing would mix them with this one's), only named."""
    if shown["dataset"] != dataset:
        st.caption(as_markdown(f"Your {what} on {shown['dataset']} is not shown here: choose that dataset again to "
                               f"see it, or compare on {dataset}."))
        return True
    if shown["version"] != version:
        st.caption(as_markdown(f"Your {what} on {dataset} is not shown: the dataset changed since (imported again, a "
                               "question kept, or a first-stage run imported). Compare again."))
        return True
    return False


def ranked_list(table, top: int) -> str:
    """A model's top candidates as an escaped markdown list: score, ✓ for gold relevant, text."""
    lines = []
    for row in table.head(top).itertuples():
        gold = " ✓" if pd.notna(row.gold_label) and row.gold_label > 0 else ""
        lines.append(f"{row.rank}. `{row.score:.3f}`{gold} {as_markdown(row.text)}")
    return "\n".join(lines)


st.title("Compare")
url, store = open_store()
datasets = require_datasets(store)

left, right = st.columns([1, 2])
dataset = pick_dataset(left, datasets, key="dataset", store=store)
names = model_loading.model_names(store, dataset)
fused = stored_runs.fusion_tags(store, dataset)
models = pick_models(
    right, store, dataset, names, fused, key="models", most=compare.MAX_MODELS,
    label="Models (the first is the reference)",
    help="fusion:… entries are fused runs kept by the Fuse these button; they compare on a whole split.",
)
dataset_version = candidate_pools.dataset_version(store, dataset)
if FUSED_KEY in st.session_state:
    st.success(as_markdown(st.session_state.pop(FUSED_KEY)))

rankers = {}
for model in models:
    ranker = None if model in fused else current_ranker(store, url, model, dataset)
    if ranker is not None:
        rankers[model] = ranker
        right.caption(as_markdown(model_loading.version_in_use(store, model, dataset)))
ready = len(rankers) == len(models) and compare.MIN_MODELS <= len(models) <= compare.MAX_MODELS
split_ready = len(rankers) == len(set(models) - set(fused)) and compare.MIN_MODELS <= len(models) <= compare.MAX_MODELS
if len(models) < compare.MIN_MODELS:
    st.info("Choose two or three models to compare.")

view = st.radio("Compare on", [ONE, SPLIT], horizontal=True, key="view")
preload_elements("DataFrame", "PlotlyChart")  # the tables and charts, before the first comparison

if view == ONE:
    if set(models) & set(fused):
        st.info("Fused runs have no model to rank a new question with: compare them on the whole split.")
    chosen_question = question_input(store, url, dataset, dataset_version)
    if st.button("Compare", type="primary", disabled=not ready, key="compare_question"):
        st.session_state.pop(QUESTION_KEY, None)
        try:
            question, candidates, qid = chosen_question()
            with st.spinner("Ranking…"):
                compared = compare.compare_question(rankers, question, candidates)
            st.session_state[RUNS_KEY] = st.session_state.get(RUNS_KEY, 0) + 1
            # Its dataset and qid, for explaining and judging in place.
            st.session_state[QUESTION_KEY] = {
                "id": st.session_state[RUNS_KEY], "comparison": compared, "dataset": dataset, "version": dataset_version,
                "qid": qid}
        except (InputError, NotTrainedError) as error:
            st.error(as_markdown(str(error)))

    shown = st.session_state.get(QUESTION_KEY)
    if shown is not None and not not_current(shown, dataset, dataset_version, "comparison of one question"):
        result = shown["comparison"]
        st.subheader("Rankings side by side")
        st.markdown(f"{len(result.ranks)} candidates · question: {as_markdown(result.question)}")
        for column, model in zip(st.columns(len(result.models)), result.models):
            column.markdown(f"**{as_markdown(model)}**")
            column.markdown(ranked_list(result.tables[model], TOP))
        st.plotly_chart(compare.bump_figure(result, top=TOP), key="bump")
        with st.expander("As tables: the top ranks side by side, and every candidate's rank per model"):
            st.dataframe(compare.aligned_lists(result, TOP), hide_index=True)
            st.dataframe(result.ranks, column_config={"text": st.column_config.TextColumn("candidate", width="large")})

        st.subheader("Why: one candidate through each model")
        reference = result.rankings[result.models[0]]
        missed = ranking.missed_answers(reference)
        only_missed = st.toggle(f"Only right answers {as_markdown(result.models[0])} ranked below a wrong one ({len(missed)})",
                                key="compare_missed")
        ranks = missed if only_missed else [scored.rank for scored in reference.scored]
        if not ranks:
            st.info("No right answer is ranked below a wrong one here.")
        else:
            opened = st.selectbox("Explain candidate (ranks are the reference's)", ranks, key="compare_open",
                                  format_func=lambda r: ranking.option_label(reference.at(r)))
            doc_id = reference.at(opened).candidate.doc_id
            st.markdown(as_markdown(reference.at(opened).candidate.text))
            # read on every run: a label written since Compare (Label page, another annotator) shows
            stored = (candidate_pools.stored_labels(store, shown["dataset"], shown["qid"]).get(doc_id)
                      if shown["qid"] else None)
            st.caption(f"Stored label: {'none' if stored is None else stored} (latest in the store)")
            rerun_if_judged()  # a label written or undone: once more, so every view shows it
            judge_panel(store, shown, shown["qid"], doc_id)
            install_keys({})  # the grade and undo keys
            # One tab per model, each as wide as Ask's explanation (side-by-side columns squeezed the
            # words of every figure into one another).
            ranks_of = {model: result.rankings[model].rank_of(doc_id) for model in result.models}
            tabs = st.tabs([f"{as_markdown(model)} · #{ranks_of[model]} · score {result.rankings[model].at(ranks_of[model]).score:.4f}"
                            for model in result.models])
            for tab, model in zip(tabs, result.models):
                with tab:
                    explain_candidate(result.rankings[model], ranks_of[model], shown["dataset"],
                                      f"compare-{shown['id']}-{model}-{ranks_of[model]}", text_shown=True)

else:
    questions = get_questions(store, url, dataset, dataset_version)
    splits = sorted({q.split for q in questions})
    left, middle, right = st.columns(3)
    split = left.selectbox("Split", splits, index=splits.index("test") if "test" in splits else 0, key="split")
    metric = middle.selectbox("Metric", METRICS, key="metric")
    clean = pick_clean(right, key="clean")
    rule = pick_label_rule(st, key="labels")
    chosen = evaluation_labels(store, dataset, rule, loaded=questions).split(split)
    source = st.radio("Compare", [MODELS, SEEDS], horizontal=True, key="runs_source")
    if source == MODELS:
        clicked = st.button("Compare on the split", type="primary", disabled=not split_ready, key="compare_split")

        def compare_now() -> compare.SplitComparison:
            runs = {m: stored_runs.load_tagged_run(store, dataset, m, split) if m in fused
                    else split_run(store, url, m, dataset, split, chosen) for m in models}
            return compare.compare_runs(runs, chosen, metric=metric, clean=clean)
    else:
        try:
            seed_folder = config.seed_runs_dir(dataset)
        except InputError as error:  # a name imported before names were checked
            st.error(as_markdown(str(error)))
            st.stop()
        groups = stored_runs.seed_groups(store, dataset, split, seed_folder)
        if not groups:
            st.info(f"No seed runs of {as_markdown(f'{dataset} {split}')}: `python -m qa_core evaluate` "
                    "keeps one per model version in the store, and `benchmarks/rankers.py` one per seed in "
                    f"{as_markdown(str(seed_folder))}.")
        picked_groups = st.multiselect(
            "Runs of one model against another's (the first is the reference)", list(groups),
            format_func=lambda g: f"{g} ({len(groups[g])}: {', '.join(r.label for r in groups[g])})",
            max_selections=compare.MAX_MODELS, key="seed_groups",
        )
        clicked = st.button("Compare the seed runs", type="primary", key="compare_seeds",
                            disabled=not compare.MIN_MODELS <= len(picked_groups) <= compare.MAX_MODELS)

        def compare_now() -> compare.SplitComparison:
            runs = {g: stored_runs.load_runs(store, groups[g]) for g in picked_groups}
            return compare.compare_seed_runs(runs, chosen, metric=metric, clean=clean)
    if clicked:
        st.session_state.pop(SPLIT_KEY, None)
        try:
            with st.spinner("Scoring and testing…"):
                st.session_state[SPLIT_KEY] = {"dataset": dataset, "version": dataset_version, "split": split,
                                               "rule": rule, "source": source, "comparison": compare_now()}
        except (InputError, NotTrainedError) as error:
            st.error(as_markdown(str(error)))

    shown = st.session_state.get(SPLIT_KEY)
    if shown is not None and not not_current(shown, dataset, dataset_version, "comparison on a split"):
        shown_dataset, shown_split, shown_rule, result = (shown[k] for k in ("dataset", "split", "rule", "comparison"))
        reference = result.models[0]
        st.subheader("Means with 95% bootstrap intervals")
        st.table(compare.means_table(result))
        with st.expander("As numbers (sortable, CSV)"):
            st.dataframe(result.significance.systems_table(), key="means",
                         column_config={c: st.column_config.NumberColumn(c, format="%.4f")
                                        for c in result.significance.systems_table().columns})
        for line in result.ties_lines():
            st.caption(as_markdown(line))
        for line in result.judgement_lines():  # none when every candidate ranked is judged
            st.caption(as_markdown(line))
        st.subheader(f"Every pair on {result.metric}")
        st.caption(as_markdown(
            f"Δ = model − vs per question; a win is Δ > 0. {result.significance.describe()} "
            + ("Seed runs: each model's per-question values averaged over its runs. " if not result.runs else "")
            + f"Over {question_set(result.clean, result.significance.questions, shown_split)} of {shown_dataset}"
            + (" (a relevant and a non-relevant candidate each). " if result.clean else " (every question with labels). ")
            + describe(shown_rule)
        ))
        st.table(compare.pairs_summary(result))
        with st.expander("Every column: raw and Holm-adjusted p-values, questions, notes"):
            st.dataframe(
                compare.summary_table(result), hide_index=True, key="summary",
                column_config={c: st.column_config.NumberColumn(c, format="%.4f") for c in ("mean Δ", "MDD")},
            )

        st.subheader(as_markdown(f"Per question: {result.metric} against {reference}"))
        other = (st.selectbox("Model to chart against the reference", result.models[1:], key="chart_model")
                 if len(result.models) > 2 else result.models[1])
        st.caption("Click a bar or a point to open its question in Ask.")
        left, right = st.columns(2)
        with left:
            bars = st.plotly_chart(compare.delta_figure(result, other), on_select="rerun", selection_mode="points",
                                   key="delta_chart")
        with right:
            points = st.plotly_chart(compare.scatter_figure(result, other), on_select="rerun",
                                     selection_mode="points", key="scatter_chart")
        ask_model = next((m for m in (other, reference) if m in names), names[0])
        for qid in compare.selected_questions([*bars.selection.points, *points.selection.points])[:LINKED]:
            st.link_button(f"Open {as_markdown(qid)} in Ask", ask_url(shown_dataset, qid, ask_model), icon=":material/search:",
                           type="primary", key=f"ask-{qid}")

        left, right = st.columns(2)
        only = left.toggle("Only questions where the models disagree", value=True, key="only_disagreements")
        different_top1 = "same top-1" in result.per_question and left.checkbox(
            "… a different top-1 candidate", value=True, key="different_top1")
        threshold = right.slider(f"… or |Δ {result.metric}| above", 0.0, 1.0, 0.1, 0.05, key="threshold")
        most = int(right.number_input("… at most, largest |Δ| first", 1, 10_000, 50, key="most"))
        table = compare.disagreements(result, threshold, different_top1, most) if only else result.per_question
        st.caption(f"{len(table)} of {len(result.per_question)} questions")
        st.dataframe(
            table.assign(ask=[ask_url(shown_dataset, qid, ask_model) for qid in table.index]),
            column_config={
                "ask": st.column_config.LinkColumn("open", display_text="Ask", width="small"),
                "question": st.column_config.TextColumn("question", width="large"),
                **{m: st.column_config.NumberColumn(m, format="%.4f") for m in result.models},
                **{
                    compare.delta_column(m): st.column_config.NumberColumn(compare.delta_column(m), format="%+.4f")
                    for m in result.models[1:]
                },
            },
            key="per_question",
        )

        # Fused from the result's own dataset throughout: its runs, its members' rankers and DEV questions
        # (a result is shown only while its dataset is the chosen one, above).
        members = [m for m in result.models if m in rankers and m in result.runs]
        if shown["source"] == MODELS and len(members) >= compare.MIN_MODELS:
            st.subheader("Fuse these")
            left, right = st.columns([3, 1])
            method = left.selectbox("Fusion", list(fusion.METHOD_LABELS), format_func=fusion.METHOD_LABELS.get,
                                    key="fusion_method")
            if right.button("Fuse these", key="fuse", help=as_markdown(f"ranx fusion of {', '.join(members)}, tuned on "
                            f"DEV of {shown_dataset}; kept in the store and offered in the model list")):
                try:
                    with st.spinner("Scoring DEV and tuning the fusion…"):
                        own = get_questions(store, url, shown_dataset, candidate_pools.dataset_version(store, shown_dataset))
                        dev = [q for q in own if q.split == "dev"]
                        recipe, fused_dev, fused_split = stored_runs.build_fusion(
                            {m: load_ranker(store, url, m, shown_dataset) for m in members}, dev,
                            {m: result.runs[m] for m in members}, method)
                        compared = [q for q in own if q.split == shown_split]
                        stored_runs.save_fusion(store, shown_dataset, recipe,
                                                {"dev": (dev, fused_dev), shown_split: (compared, fused_split)},
                                                actor=current_actor())
                    st.session_state[FUSED_KEY] = (
                        f"Kept {recipe.tag} (DEV MAP {recipe.dev_map:.4f}, {recipe.params or 'no parameters'}): "
                        "choose it in the model list to compare it like any model.")
                    st.rerun()
                except (InputError, NotTrainedError) as error:
                    st.error(as_markdown(str(error)))

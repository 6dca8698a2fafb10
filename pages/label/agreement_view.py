"""The agreement dashboard: Krippendorff's α and Cohen's κ with bootstrap intervals, bias, disagreement
by question class, timing, calibration results, the share of double-annotated pairs, and a model or
an external system as one more annotator."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.common.signin import current_actor
from pages.judging import keyed_button
from pages.label.shared import NOTICE, Desk, keys_help, model_as_annotator_scores
from pages.render.markdown import as_markdown
from qa_core.services import analysis, labeling
from qa_core.services.labeling import charts, dashboard, management, suggestions
from qa_core.types import InputError


@st.cache_data(show_spinner="Computing agreement and its confidence intervals…", max_entries=16)
def get_dashboard(_store, url: str, dataset: str, stamp: str) -> dashboard.Dashboard:
    """The agreement dashboard; ``stamp`` (labels, adjudications, timed judgements) says when it
    changed (the bootstrap takes about a second per annotator pair)."""
    return dashboard.store_dashboard(_store, dataset, analysis.question_analyzer(_store))


@st.cache_data(show_spinner="Computing the model's agreement with each annotator…", max_entries=16)
def get_annotator_agreement(_store, url: str, dataset: str, stamp: str, scores: dict[int, float]) -> pd.DataFrame:
    """``suggestions.store_annotator_agreement``, again only when the labels or the scores so far change."""
    return suggestions.store_annotator_agreement(_store, dataset, scores)


def coefficient(value: float | None, items: int, enough: bool) -> tuple[str, str | None]:
    """The metric's value and, apart, why it has none: a metric's value does not wrap, and the
    reason written into it was cut off in its third of the page."""
    if not enough:
        return "—", f"{labeling.NOT_ENOUGH} ({items} shared)"
    return ("—", "no variation") if value is None else (f"{value:.3f}", None)


def agreement_view(desk: Desk) -> None:
    """Agreement over everyone's current labels, with the intervals that say how far it holds."""
    store, dataset = desk.store, desk.dataset
    board = get_dashboard(store, desk.url, dataset, dashboard.dashboard_stamp(store, dataset))
    report = board.report
    left, middle, right = st.columns(3)
    left.metric("Annotators", len(report.annotators))
    left.caption(as_markdown(dashboard.annotators_line(board)))
    middle.metric("Pairs judged by two or more", report.items_with_overlap)
    if report.overlap_share is not None:
        middle.caption(f"{report.overlap_share:.0%} of {report.judged} judged")
    alpha, missing = coefficient(report.alpha, report.items_with_overlap, report.enough)
    right.metric("Krippendorff's α (ordinal)", alpha, help=f"95% bootstrap interval {report.alpha_ci}")
    right.caption(missing or f"95% interval {report.alpha_ci}")
    if not report.enough:
        st.warning(
            f"Not enough overlap: {report.items_with_overlap} pairs were judged by two or more annotators; "
            f"agreement means little below {labeling.MIN_SHARED_PAIRS}. Raise the share of double-annotated "
            "pairs below, or label more."
        )
    overlap_setting(desk)
    if not board.calibration.empty:
        st.markdown("**Calibration against gold**")
        st.caption("Each annotator's calibration judgements against gold (not labels: they count neither in "
                   "training nor in the agreement above); exact agreement and quadratic-weighted κ (scikit-learn).")
        st.dataframe(board.calibration, hide_index=True, key="calibration_results")
    model_as_annotator(desk)
    st.caption("Keys: E export the dashboard as CSV · " + keys_help(desk.views))
    if not report.pairs:
        st.info("Agreement needs pairs judged by two annotators; the queue hands a share of pairs to two.")
        return
    st.caption(
        "Cohen's κ per annotator pair over the pairs both judged (scikit-learn; weighted: quadratic over "
        "grades 0–4) with a 95% bootstrap interval over those pairs; Krippendorff's α over everyone "
        f"(krippendorff package). Below {labeling.MIN_SHARED_PAIRS} shared pairs a coefficient is not shown."
    )
    st.dataframe(board.kappas, hide_index=True, key="kappas")
    keyed_button(
        st.download_button, "Export the dashboard as CSV", dashboard.dashboard_csv(board),
        file_name=f"agreement-{dataset}.csv", mime="text/csv", key="export", shortcut="E",
    )
    st.caption(
        "Bias: mean of (grade − consensus) over the pairs judged with others; the consensus is the "
        "reviewer's grade, else the median. Seconds: from the pair shown to the judgement."
    )
    # One under the other: in thirds of the page at 1280 px each table's last columns (the bias, the
    # disagreement, the mean seconds) were cut off behind a sideways scroll.
    for title, table in [("Bias per annotator", board.bias), ("Disagreement per question class", board.by_class),
                         ("Seconds per judgement", board.timing)]:
        st.markdown(f"**{title}**")
        st.dataframe(table, hide_index=True)
    for name, figure in charts.dashboard_figures(board).items():
        st.plotly_chart(figure, key=f"chart-{name}")


def model_as_annotator(desk: Desk) -> None:
    """With the toggle on, a model or a system (a run, a service) judged against each annotator
    (scored in the background, the table growing as it is scored)."""
    chosen = model_as_annotator_scores(desk, "A model or system as one more annotator", "agreement_model")
    if chosen is None:
        return
    model, job = chosen
    store, dataset = desk.store, desk.dataset
    error = job.progress().error
    if error:
        st.error(as_markdown(f"{model} could not score every pair (the table holds those it scored): {error}"))
    st.caption(as_markdown(
        f"{model} as an annotator: its first-ranked candidate of each question counts as relevant "
        f"(grade {suggestions.MODEL_RELEVANT}), the rest as not (0); scores of different models share no scale, "
        "a rank does. Against each annotator on relevance (their grade > 0) over the pairs both judged "
        "(a run's unranked pairs are left out): the share judged alike, Cohen's κ with a 95% bootstrap "
        f"interval (not shown below {labeling.MIN_SHARED_PAIRS} pairs), and how often each said relevant."
    ))
    stamp = dashboard.dashboard_stamp(store, dataset)
    shares = {name: st.column_config.NumberColumn(format="percent")
              for name in ("alike", "annotator: relevant", "model: relevant")}
    kappas = {name: st.column_config.NumberColumn(format="%.3f") for name in ("Cohen's κ", "κ low", "κ high")}
    st.dataframe(get_annotator_agreement(store, desk.url, dataset, stamp, job.snapshot()), hide_index=True,
                 key="model_agreement", column_config={**shares, **kappas})


def overlap_setting(desk: Desk) -> None:
    """The dataset's share of double-annotated pairs: in the store, so every session draws the same sample."""
    annotator = desk.annotator
    settings = desk.store.annotation.annotation_settings(desk.dataset)
    manages = management.may_manage(current_actor())
    with st.form("overlap_form", border=False):
        share = st.slider(
            "Share of pairs judged by two annotators", 0, 100, round(settings.overlap_share * 100), step=5,
            format="%d%%", key=desk.key("overlap_share"),
        )
        st.caption(as_markdown(management.overlap_line(settings)))
        if not manages:
            st.caption("Only an admin changes it.")
        if st.form_submit_button("Save share", disabled=annotator is None or not manages) and annotator is not None:
            try:
                management.set_overlap_percent(desk.store, desk.dataset, share, annotator, current_actor())
            except InputError as error:
                st.error(as_markdown(str(error)))
            else:
                st.session_state[NOTICE] = f"Share of double-annotated pairs set to {share}%."
                st.rerun()

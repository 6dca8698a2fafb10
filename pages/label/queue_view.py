"""The Label view: the queue's pair, one key per grade, skip and undo; the queue's order, split and
judging mode (graded, pairwise, top-k) chosen above it."""

from __future__ import annotations

import streamlit as st

from pages.common.caches import show_not_trained
from pages.common.signin import current_actor
from pages.judging import GRADE_NAMES, grade_buttons, keyed_button
from pages.judging.pooling import DEFAULT_POOL_DEPTH, pool_options, show_pool_progress
from pages.label.calibration_view import calibration_gate
from pages.label.preference_view import preference_view
from pages.label.shared import (
    HOLDER,
    NOTICE,
    SHOWN,
    SUGGEST,
    SUGGESTING,
    UNDO_DRAWN,
    Desk,
    keys_help,
    pair_beside_guidelines,
    scoring_progress,
)
from pages.render.markdown import as_markdown
from qa_core.services import labeling, model_loading
from qa_core.services.labeling import preferences, workplace
from qa_core.types import InputError, NotTrainedError

ORDER_HELP = {
    "random": "a seeded random order",
    "uncertainty": "pairs the model is least sure about first",
    "disagreement": "pairs whose rank differs most between the models first",
    "diversity": "one pair of each question in turn",
    "pool": "depth-k pool of these systems: the union of their top k, unjudged first",
}


def judge(session: labeling.LabelingSession, item: labeling.QueueItem, grade: int) -> None:
    """Button callback: write the grade of the pair on screen. A second press that arrives before
    the next pair is drawn finds no pair on screen and writes nothing."""
    if st.session_state.get(SHOWN) != item.claim.claim_id:
        return
    del st.session_state[SHOWN]
    try:
        session.label(item, grade)
    except InputError as error:  # e.g. the dataset was replaced meanwhile
        st.session_state[NOTICE] = f"Not saved: {error}"
        return
    st.session_state[NOTICE] = f"Labelled {item.record.qid} / {item.record.doc_id} as {grade} ({GRADE_NAMES[grade]})."


def skip(session: labeling.LabelingSession, item: labeling.QueueItem) -> None:
    if st.session_state.pop(SHOWN, None) == item.claim.claim_id:
        session.skip(item)
        st.session_state[NOTICE] = f"Skipped {item.record.qid} / {item.record.doc_id}: it comes back at the end."


def undo(session: labeling.LabelingSession) -> None:
    """Button callback: take back this tab's last label and show that pair again. As for a grade or
    a skip, a second press handled before the next run drew the Undo button takes nothing back."""
    if not st.session_state.pop(UNDO_DRAWN, False):
        return
    st.session_state.pop(SHOWN, None)
    try:
        item = session.undo()
    except InputError as error:  # e.g. the role to label was taken away meanwhile
        st.session_state[NOTICE] = f"Not undone: {error}"
        return
    st.session_state[NOTICE] = (
        "Nothing of yours to undo in this queue (dataset and split), another session shows that pair now, or "
        "the queue no longer wants your label on it (a reviewer settled it, or enough others judged it): "
        "nothing was taken back."
        if item is None
        else f"Took back your label of {item.record.qid} / {item.record.doc_id} (it stays in the history)."
    )


def remember_suggesting(annotator: str) -> None:
    st.session_state.setdefault(SUGGESTING, {})[annotator] = st.session_state[SUGGEST]


def suggestion_choice(desk: Desk, annotator: str) -> str | None:
    """The model whose suggestion this annotator asked to see, or ``None``: off by default (a
    suggestion anchors the judgement), on per annotator."""
    st.session_state[SUGGEST] = st.session_state.setdefault(SUGGESTING, {}).get(annotator, False)
    if not st.toggle("Show the model's suggestion (off by default: it can anchor your judgement)", key=SUGGEST,
                     on_change=remember_suggesting, args=(annotator,)):
        return None
    return st.selectbox("Suggesting model", model_loading.model_names(desk.store, desk.dataset), key="suggest_model")


def label_view(desk: Desk, annotator: str) -> None:
    """The queue's settings, then its pair in the judging mode chosen (a new annotator's
    calibration first, in the graded mode)."""
    settings = queue_settings(desk)
    if settings is None:
        return
    mode, split, order, scores, depth = settings
    if mode != preferences.GRADED:
        preference_view(desk, annotator, mode, order, scores, split, depth)
    elif not calibration_gate(desk, annotator):
        graded_queue(desk, annotator, order, scores, split, depth)


def queue_settings(desk: Desk) -> tuple[str, str, str, dict[str, dict[int, float]], int] | None:
    """The judging mode, split and order, the scores of the model(s) a model-based order reads
    (filled in the background; ``None`` after the page says a model is not trained) and the pool
    order's depth."""
    store, dataset = desk.store, desk.dataset
    mode = st.selectbox("Judging", list(preferences.MODES), key="label_mode",
                        format_func=lambda m: f"{m}: {preferences.MODES[m]}")
    splits, first = workplace.queue_splits(store, dataset)
    left, right = st.columns([1, 3])
    split = left.selectbox("Split", splits, index=first, key=f"label_split-{dataset}")
    if split == "test":
        left.caption("Labels on TEST pairs count in reported TEST metrics only under the training-label rule; "
                     "gold stays the default on Compare, Errors and the CLI.")
    order = right.selectbox(
        "Queue order", labeling.STRATEGIES, key="order", format_func=lambda s: f"{s}: {ORDER_HELP[s]}"
    )
    names = model_loading.model_names(store, dataset)
    chosen: list[str] = []
    depth = DEFAULT_POOL_DEPTH
    if order == "pool":
        chosen, depth = pool_options(names)
    elif order == "uncertainty":
        chosen = [st.selectbox("Model", names, key="order_model")]
    elif order == "disagreement":
        chosen = st.multiselect("Models (two or more)", names, default=names[:2], key="order_models")
    jobs = {}
    for model in chosen:
        try:
            jobs[model] = desk.scores(model)
        except NotTrainedError as error:
            show_not_trained(error, model, dataset)
            return None
    failed = [f"{model}: {job.progress().error}" for model, job in jobs.items() if job.progress().error]
    if failed:
        st.warning(as_markdown("Scoring stopped early, the rest of the queue is in random order: " + "; ".join(failed)))
    elif jobs and not all(job.progress().done for job in jobs.values()):
        scoring_progress(jobs)
    return mode, split, order, {model: job.snapshot() for model, job in jobs.items()}, depth


def graded_queue(
    desk: Desk, annotator: str, order: str, scores: dict[str, dict[int, float]], split: str, depth: int
) -> None:
    """The queue's pair beside the guidelines, one key per grade, skip and undo."""
    store, dataset = desk.store, desk.dataset
    suggesting = suggestion_choice(desk, annotator)
    try:
        session = labeling.LabelingSession.build(
            store,
            dataset,
            annotator,
            order,
            scores=scores,
            holder=st.session_state[HOLDER],
            policy=labeling.queue_policy(store, dataset),
            split=split,
            actor=current_actor(),
            depth=depth,
        )
        item = session.current()
        progress = session.progress()
    except InputError as error:
        st.error(as_markdown(str(error)))
        return

    mine = progress.labelled_by_me + progress.available_to_me + progress.held_by_others
    st.progress(
        progress.labelled_by_me / mine if mine else 1.0,
        text=f"{progress.labelled_by_me} of {mine} labelled by you · "
        f"{progress.complete} of {progress.total} pairs complete in this queue",
    )
    if order == "pool":
        show_pool_progress(desk, scores, depth, split)
    notice = st.session_state.pop(NOTICE, None)
    if notice:
        st.caption(as_markdown(notice))

    if item is None:
        st.session_state.pop(SHOWN, None)
        held = f" ({progress.held_by_others} held by other sessions right now)" if progress.held_by_others else ""
        st.success(f"Nothing left for you to label in this queue{held}.")
    else:
        st.session_state[SHOWN] = item.claim.claim_id
        pair_beside_guidelines(desk, item.record, suggesting)
        grade_buttons("grade", judge, lambda grade: (session, item, grade), primary_from=1)
    left, right, _ = st.columns([1, 1, 3])
    keyed_button(left.button, "Skip", key="skip", shortcut="S", on_click=skip, args=(session, item),
                 disabled=item is None)
    st.session_state[UNDO_DRAWN] = True
    keyed_button(right.button, "Undo", key="undo", shortcut="U", on_click=undo, args=(session,))
    st.caption(
        "Keys: 0–4 judge the pair · S skip · U undo this tab's last label · H model suggestion · J judging mode · O queue order · M model(s) · "
        + keys_help(desk.views)
    )

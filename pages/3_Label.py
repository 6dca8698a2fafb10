"""Label: judge (question, candidate) pairs one at a time with one key per grade, undo and skip;
agreement between annotators; a review view where a reviewer settles conflicts.

Widgets and layout only; the queue, its leases and the agreement coefficients are
``qa_core.services.labeling`` and the store's (``db/labeling.py``): every judgement is written at once with
history, and two browser sessions are never handed the same pair at once (each session holds its
pair through a lease in the store). Data text is shown as escaped markdown, never as HTML.
"""

from __future__ import annotations

import uuid

import pandas as pd
import streamlit as st

from db.base import MAX_LABEL, MIN_LABEL
from pages import current_actor, get_ranker, open_store, pick_dataset, require_datasets, show_not_trained
from qa_core.access import Permission
from qa_core.services import labeling, workbench
from qa_core.types import InputError, NotTrainedError

GRADE_NAMES = {0: "not relevant", 1: "related", 2: "partly answers", 3: "answers", 4: "perfect answer"}
assert sorted(GRADE_NAMES) == list(range(MIN_LABEL, MAX_LABEL + 1)), "one button per grade the store accepts"
ORDER_HELP = {
    "random": "a seeded random order",
    "uncertainty": "pairs the model is least sure about first",
    "disagreement": "pairs whose rank differs most between the models first",
    "diversity": "one pair of each question in turn",
}
LABEL, AGREEMENT, REVIEW = "Label", "Agreement", "Review conflicts"
NEW_NAME = "New annotator…"
LABEL_SPLIT = "train"  # the queue's default split (issue 22: never TEST unless chosen)
ANNOTATOR, HOLDER, SHOWN, NOTICE, CONFIG = "annotator", "label_holder", "label_shown", "label_notice", "label_config"

st.set_page_config(page_title="Label · Rerank Lab", layout="wide")


@st.cache_resource(show_spinner="Scoring the dataset's pairs…")
def get_scores(_store, url: str, model: str, dataset: str, model_version: str | None, dataset_version: str):
    """``{candidate_id: score}`` of one model over the dataset, for the uncertainty and
    disagreement orders; a new model version or a re-import scores again."""
    ranker = get_ranker(_store, url, model, dataset, model_version, dataset_version)  # the pages' shared cache
    return labeling.model_scores(ranker, _store.candidate_rows(dataset))


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
    st.session_state.pop(SHOWN, None)
    item = session.undo()
    st.session_state[NOTICE] = (
        "Nothing of yours to undo here, or another session holds that pair now."
        if item is None
        else f"Took back your label of {item.record.qid} / {item.record.doc_id} (it stays in the history)."
    )


def label_view(store, dataset: str, annotator: str) -> None:
    splits = list(store.dataset_summary(dataset)["questions"])
    left, right = st.columns([1, 3])
    split = left.selectbox(  # TRAIN by default: labels there train models and never move a TEST metric
        "Split", splits, index=splits.index(LABEL_SPLIT) if LABEL_SPLIT in splits else 0, key=f"label_split-{dataset}",
    )
    if split == "test":
        left.caption("Labels on TEST pairs count in reported TEST metrics only under the training-label rule; "
                     "gold stays the default on Compare, Errors and the CLI.")
    order = right.selectbox(
        "Queue order", labeling.STRATEGIES, key="order", format_func=lambda s: f"{s}: {ORDER_HELP[s]}"
    )
    names = workbench.model_names(store, dataset)
    chosen: list[str] = []
    if order == "uncertainty":
        chosen = [st.selectbox("Model", names, key="order_model")]
    elif order == "disagreement":
        chosen = st.multiselect("Models (two or more)", names, default=names[:2], key="order_models")
    scores = {}
    for model in chosen:
        try:
            scores[model] = get_scores(
                store, url, model, dataset, workbench.model_version_key(store, model, dataset), workbench.dataset_version(store, dataset)
            )
        except NotTrainedError as error:
            show_not_trained(error, model, dataset)
            return
    try:
        session = labeling.LabelingSession.build(
            store, dataset, annotator, order, scores=scores, holder=st.session_state[HOLDER], split=split,
            actor=current_actor(),
        )
        item = session.current()
        progress = session.progress()
    except InputError as error:
        st.error(workbench.as_markdown(str(error)))
        return

    mine = progress.labelled_by_me + progress.available_to_me + progress.held_by_others
    st.progress(
        progress.labelled_by_me / mine if mine else 1.0,
        text=f"{progress.labelled_by_me} of {mine} labelled by you · "
        f"{progress.complete} of {progress.total} pairs complete in this queue",
    )
    notice = st.session_state.pop(NOTICE, None)
    if notice:
        st.caption(workbench.as_markdown(notice))

    if item is None:
        st.session_state.pop(SHOWN, None)
        held = f" ({progress.held_by_others} held by other sessions right now)" if progress.held_by_others else ""
        st.success(f"Nothing left for you to label in this queue{held}.")
    else:
        st.session_state[SHOWN] = item.claim.claim_id
        with st.container(border=True):
            st.caption(workbench.as_markdown(f"{item.record.qid} · {item.record.doc_id}"))
            st.markdown(f"**Question:** {workbench.as_markdown(item.record.question)}")
            st.markdown(f"**Candidate:** {workbench.as_markdown(item.record.candidate)}")
        for column, (grade, name) in zip(st.columns(len(GRADE_NAMES)), GRADE_NAMES.items()):
            column.button(
                f"{grade} · {name}",
                key=f"grade-{grade}",
                shortcut=str(grade),
                on_click=judge,
                args=(session, item, grade),
                width="stretch",
                type="primary" if grade > 0 else "secondary",
            )
    left, right, _ = st.columns([1, 1, 3])
    left.button("Skip", key="skip", shortcut="S", on_click=skip, args=(session, item), disabled=item is None)
    right.button("Undo", key="undo", shortcut="U", on_click=undo, args=(session,))
    st.caption("Keys: 0–4 judge the pair · S skip · U undo your last label.")


def agreement_view(store, dataset: str) -> None:
    report = labeling.agreement_report(store, dataset)
    left, middle, right = st.columns(3)
    left.metric("Annotators", len(report.annotators))
    middle.metric("Pairs judged by two or more", report.items_with_overlap)
    right.metric("Krippendorff's α (ordinal)", "—" if report.alpha is None else f"{report.alpha:.3f}")
    if not report.pairs:
        st.info("Agreement needs pairs judged by two annotators; the queue hands a share of pairs to two.")
        return
    st.caption(
        "Cohen's κ per annotator pair over the pairs both judged (scikit-learn; weighted: quadratic over "
        "grades 0–4); Krippendorff's α over everyone (krippendorff package). — means undefined "
        "(no variation)."
    )
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "annotator": p.annotator_a,
                    "other annotator": p.annotator_b,
                    "pairs both judged": p.items,
                    "Cohen's κ": p.kappa,
                    "weighted κ": p.weighted_kappa,
                }
                for p in report.pairs
            ]
        ),
        hide_index=True,
        key="kappas",
    )


def review_view(store, dataset: str, reviewer: str | None) -> None:
    conflicts = labeling.conflicts(store, dataset)
    notice = st.session_state.pop(NOTICE, None)
    if notice:
        st.success(workbench.as_markdown(notice))
    if not conflicts:
        st.info("No open conflicts: every pair's annotators agree or a reviewer has settled it.")
        return
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "qid": c.qid,
                    "doc_id": c.doc_id,
                    "question": c.question,
                    "candidate": c.candidate,
                    "labels": ", ".join(f"{name}: {grade}" for name, grade in c.labels.items()),
                    "gold": c.gold_label,
                }
                for c in conflicts
            ]
        ),
        hide_index=True,
        key="conflicts",
    )
    picked = st.selectbox(
        "Conflict to settle",
        range(len(conflicts)),
        format_func=lambda i: f"{conflicts[i].qid} / {conflicts[i].doc_id}",
        key="conflict",
    )
    conflict = conflicts[picked]
    with st.container(border=True):
        st.markdown(f"**Question:** {workbench.as_markdown(conflict.question)}")
        st.markdown(f"**Candidate:** {workbench.as_markdown(conflict.candidate)}")
        st.markdown(
            "**Labels:** "
            + workbench.as_markdown(", ".join(f"{name}: {grade}" for name, grade in conflict.labels.items()))
        )
    grade = st.radio(
        "Final grade", list(GRADE_NAMES), horizontal=True, key="final_grade", format_func=lambda g: f"{g} · {GRADE_NAMES[g]}"
    )
    note = st.text_input("Note (optional)", key="adjudication_note")
    if reviewer is None:
        st.info("Choose or type your name above to settle conflicts as a reviewer.")
    if st.button("Settle", type="primary", key="adjudicate", disabled=reviewer is None):
        try:
            store.adjudicate(conflict.candidate_id, int(grade), reviewer, note or None, actor=current_actor())
        except InputError as error:
            st.error(workbench.as_markdown(str(error)))
        else:
            st.session_state[NOTICE] = f"Settled {conflict.qid} / {conflict.doc_id} as {grade} ({GRADE_NAMES[grade]})."
            st.rerun()


st.title("Label")
url, store = open_store(show_device=False)
datasets = require_datasets(store)

# One holder id per browser session: the store leases the pair on screen to it.
st.session_state.setdefault(HOLDER, f"session-{uuid.uuid4().hex}")
left, right = st.columns(2)
dataset = pick_dataset(left, datasets, key="label_dataset")
actor = current_actor()
if actor.signed_in:  # team mode: a label's annotator is the signed-in user, never a typed name
    right.text_input("Annotator", value=actor.name, disabled=True, key="signed_in_annotator")
    annotator = st.session_state[ANNOTATOR] = actor.name
else:
    remembered = st.session_state.get(ANNOTATOR)
    known = sorted({name for judged in store.current_labels(dataset).values() for name in judged} | {remembered} - {None})
    options = [*known, NEW_NAME]
    choice = right.selectbox("Annotator", options, index=options.index(remembered) if remembered in options else len(known))
    if choice == NEW_NAME:
        typed = right.text_input("Your name", key="new_annotator", placeholder="e.g. alice").strip()
        if typed:
            st.session_state[ANNOTATOR] = typed
            st.rerun()  # the name is now a known one: the select box shows it
    else:
        st.session_state[ANNOTATOR] = choice
    annotator = st.session_state.get(ANNOTATOR) if choice != NEW_NAME else None

previous = st.session_state.get(CONFIG)
if previous is not None and previous != (dataset, annotator):
    store.release_claims(previous[0], st.session_state[HOLDER])  # hand back the pair left on screen
st.session_state[CONFIG] = (dataset, annotator)

views = [LABEL, *([AGREEMENT] if actor.may(Permission.SEE_AGREEMENT) else []),
         *([REVIEW] if actor.may(Permission.ADJUDICATE) else [])]  # an annotator labels and sees their progress
view = st.radio("View", views, horizontal=True, key="label_view", label_visibility="collapsed")
if view == LABEL:
    if annotator is None:
        st.info("Choose your name or type a new one to start labelling.")
    else:
        label_view(store, dataset, annotator)
elif view == AGREEMENT:
    agreement_view(store, dataset)
else:
    review_view(store, dataset, annotator)

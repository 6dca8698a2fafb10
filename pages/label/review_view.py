"""Review: a reviewer settles the pairs whose annotators disagree (a model may join as one more
annotator)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.common.signin import current_actor
from pages.judging import GRADE_NAMES, grade_buttons
from pages.label.shared import NOTICE, Desk, keys_help, model_as_annotator_scores
from pages.render.markdown import as_markdown
from qa_core.services import labeling
from qa_core.services.labeling import review, suggestions
from qa_core.types import InputError


def note_key(conflict: labeling.Conflict) -> str:
    """The note box of one conflict: a note belongs to the conflict it was written for, so the
    next conflict's box starts empty, and a settled conflict's box goes with it."""
    return f"adjudication_note:{conflict.candidate_id}"


def settle(store, conflict: labeling.Conflict, grade: int, reviewer: str | None) -> None:
    """Button callback: the reviewer's final grade of the conflict on screen, with its note."""
    try:
        review.settle(store, conflict, grade, reviewer, st.session_state.get(note_key(conflict)), current_actor())
    except InputError as error:
        st.session_state[NOTICE] = f"Not settled: {error}"
        return
    st.session_state[NOTICE] = f"Settled {conflict.qid} / {conflict.doc_id} as {grade} ({GRADE_NAMES[grade]})."


def model_as_annotator(desk: Desk, conflicts: list[labeling.Conflict]) -> list[labeling.Conflict]:
    """With the toggle on, the chosen model's disagreements with the annotators' consensus join
    the conflicts to settle (scored in the background, queued as they are scored)."""
    chosen = model_as_annotator_scores(desk, "A model as one more annotator", "review_model")
    if chosen is None:
        return conflicts
    model, job = chosen
    store, dataset = desk.store, desk.dataset
    disagreements = suggestions.model_disagreements(store, dataset, model, job.snapshot())
    st.caption(as_markdown(
        f"{len(disagreements)} pairs where {model} (its first-ranked candidate of each question counts as "
        f"{suggestions.MODEL_RELEVANT}, the rest as 0) disagrees with the annotators' consensus on relevance."
    ))
    return review.with_model_disagreements(conflicts, disagreements)


def review_view(desk: Desk) -> None:
    """The open conflicts, the one chosen with every annotator's grade, and the reviewer's final grade."""
    store, dataset, reviewer = desk.store, desk.dataset, desk.annotator
    conflicts = model_as_annotator(desk, labeling.conflicts(store, dataset))
    notice = st.session_state.pop(NOTICE, None)
    if notice:
        (st.error if notice.startswith("Not settled") else st.success)(as_markdown(notice))
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
        # at their own width the texts pushed labels and gold out of view at 1280 px
        column_config={name: st.column_config.TextColumn(width="medium") for name in ("question", "candidate")},
        key="conflicts",
    )
    by_candidate = {c.candidate_id: c for c in conflicts}
    # The options are the conflicts themselves (not positions): once one is settled its choice is
    # gone, so the box moves on with the card instead of keeping the settled pair's name.
    picked = st.selectbox(
        "Conflict to settle",
        list(by_candidate),
        format_func=lambda candidate_id: f"{by_candidate[candidate_id].qid} / {by_candidate[candidate_id].doc_id}",
        key="conflict",
    )
    conflict = by_candidate[picked]
    with st.container(border=True):
        st.markdown(f"**Question:** {as_markdown(conflict.question)}")
        st.markdown(f"**Candidate:** {as_markdown(conflict.candidate)}")
        st.markdown(
            "**Labels:** "
            + as_markdown(", ".join(f"{name}: {grade}" for name, grade in conflict.labels.items()))
        )
    st.text_input("Note (optional)", key=note_key(conflict))
    party = review.is_party(conflict, reviewer)
    if reviewer is None:
        st.info("Choose or type your name above to settle conflicts as a reviewer.")
    elif party:
        st.warning(as_markdown(f"You ({reviewer}) labelled this pair: another reviewer settles it."))
    grade_buttons("settle", settle, lambda grade: (store, conflict, grade, reviewer), disabled=reviewer is None or party)
    st.caption("Keys: 0–4 settle the conflict shown with that final grade · F conflict list · H model as an annotator · " + keys_help(desk.views))

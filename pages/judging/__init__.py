"""Judging a (question, candidate) pair wherever it is shown: the grade scale, one button per grade
with its digit key (``keyed_button``, pressed by ``assets/label_keys.js``), and the judge-in-place
panel of the Ask page, writing through ``labeling.workplace`` (``judge_in_place`` / ``undo_in_place``) as
the Label page's annotator (local mode: the name kept under ``ANNOTATOR``; team mode: the signed-in user, whose role
the store checks in the label's transaction).

A package rather than ``pages/judging.py``: Streamlit lists every ``.py`` file in ``pages/`` as a
page in the sidebar drawn before ``app.py``'s navigation runs.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from pages.common.scripts import run_script
from pages.common.signin import current_actor
from pages.render.markdown import as_markdown
from qa_core.access import Permission
from qa_core.services import labeling
from qa_core.services.labeling import workplace
from qa_core.types import InputError

GRADE_NAMES = {0: "not relevant", 1: "related", 2: "partly answers", 3: "answers", 4: "perfect answer"}
GRADE_MEANINGS = {
    0: "says nothing about what the question asks",
    1: "on the question's topic, but does not answer it",
    2: "holds part of the answer, or the answer with something missing",
    3: "answers the question",
    4: "answers it fully and on its own; nothing else is needed",
}
assert sorted(GRADE_NAMES) == list(workplace.GRADES), "one button per grade the store accepts"
ANNOTATOR = "annotator"  # session key: the local annotator's name, shared by the Label and Ask pages
BUTTON_KEYS = "button_keys"  # session key: this run's buttons with a key (keyed_button), until install_keys
JUDGED, JUDGE_NOTICE = "judged_in_place", "judge_notice"

Keys = dict[str, tuple[list[str], str]]  # letter -> (CSS selectors tried in turn, "click" or "focus")


def keyed_button(widget: Callable[..., bool], *args, key: str, shortcut: str, **kwargs) -> bool:
    """``widget`` (a container's ``button`` or ``download_button``, given its ``args``) drawn with
    ``shortcut`` shown on it, which ``label_keys.js`` presses by clicking the button, or as soon as
    it is drawn. Streamlit's own shortcut works only once its binding ran, after the button was
    drawn; the first pair's grade buttons are drawn a beat after the pair (Streamlit draws an
    element type's first one in a tab once its code has loaded), and a digit pressed in between was
    lost (issue 21)."""
    selectors = st.session_state.setdefault(BUTTON_KEYS, {}).setdefault(shortcut.lower(), ([], "click"))[0]
    if f".st-key-{key} button" not in selectors:  # a fragment's reruns draw the same button again
        selectors.append(f".st-key-{key} button")
    return widget(*args, key=key, shortcut=shortcut, **kwargs)


def install_keys(keys: Keys) -> None:
    """The page's ``keys``, its keyed buttons drawn since the last install, and the focus rules of
    ``label_keys.js``."""
    run_script(st, "label_keys.js", "rerankLabKeys",
               {letter: list(entry) for letter, entry in (keys | st.session_state.pop(BUTTON_KEYS, {})).items()})


def grade_buttons(
    key: str,
    on_click: Callable[..., None],
    args: Callable[[int], tuple],
    *,
    disabled: bool = False,
    primary_from: int | None = None,
) -> None:
    """One button per grade, its digit the shortcut: judging a pair and settling a conflict alike."""
    for column, (grade, name) in zip(st.columns(len(GRADE_NAMES)), GRADE_NAMES.items()):
        keyed_button(
            column.button,
            f"{grade} · {name}",
            key=f"{key}-{grade}",
            shortcut=str(grade),
            on_click=on_click,
            args=args(grade),
            disabled=disabled,
            width="stretch",
            type="primary" if primary_from is not None and grade >= primary_from else "secondary",
        )


# ---------------------------------------------------------------------- judging in place (Ask)


def take_local_name() -> None:
    """Text box callback: a typed name becomes the local annotator, or the box says why not."""
    try:
        st.session_state[ANNOTATOR] = labeling.annotator_name(st.session_state.get("judge_name", ""))
    except InputError as error:
        st.session_state[JUDGE_NOTICE] = (True, f"Not taken: {error}.")


def judge_in_place(store, state: dict, qid: str, doc_id: str, grade: int) -> None:
    """Button callback: ``grade`` for the pair as the current annotator; the page's next run reads
    the stored labels again and shows it."""
    actor = current_actor()
    try:
        workplace.judge_in_place(store, state["dataset"], qid, doc_id, grade, annotator_now(), actor)
    except InputError as error:  # no name yet, the dataset replaced, or the role taken away meanwhile
        st.session_state[JUDGE_NOTICE] = (True, f"Not saved: {error}")
        return
    st.session_state[JUDGE_NOTICE] = (False, f"Labelled {qid} / {doc_id} as {grade} ({GRADE_NAMES[grade]}).")
    st.session_state[JUDGED] = True


def undo_in_place(store, state: dict) -> None:
    """Button callback: take back the annotator's latest label in the dataset (kept in the history)."""
    try:
        undone = workplace.undo_in_place(store, state["dataset"], annotator_now(), current_actor())
    except InputError as error:
        st.session_state[JUDGE_NOTICE] = (True, f"Not undone: {error}")
        return
    st.session_state[JUDGE_NOTICE] = (False, "Nothing of yours to undo in this dataset." if undone is None else
                                      f"Took back your label {undone['value']} of {undone['qid']} / {undone['doc_id']} "
                                      "(it stays in the history).")  # the pair as saving named it
    st.session_state[JUDGED] = True


def annotator_now() -> str | None:
    """Who a label is written as: the signed-in user (team mode), else the Label page's annotator."""
    actor = current_actor()
    return actor.name if actor.signed_in else st.session_state.get(ANNOTATOR)


def rerun_if_judged() -> None:
    """A fragment's first call: after a label was written or undone in it, the whole page runs
    again, so that the ranked table's stored label column shows it at once."""
    if st.session_state.pop(JUDGED, False):
        st.rerun()


def judge_panel(store, state: dict, qid: str | None, doc_id: str) -> None:
    """The open candidate's grade buttons (keys 0–4) and undo (U), or why it cannot be judged here.
    Drawn in a fragment: ``rerun_if_judged`` first."""
    if qid is None:
        st.caption("A typed question's candidates belong to other questions: keep this question (above) to judge them "
                   "on it, or judge a dataset question's.")
        return
    if not current_actor().may(Permission.LABEL):
        st.caption(as_markdown(f"{current_actor().describe()} may not label pairs."))
        return
    name = annotator_now()
    if name is None:
        st.text_input("Annotator (your name, as on the Label page) to judge here", key="judge_name",
                      placeholder="e.g. alice", on_change=take_local_name)
    notice = st.session_state.pop(JUDGE_NOTICE, None)
    if notice:
        refused, text = notice
        (st.warning if refused else st.caption)(as_markdown(text))
    # Enabled before a name is given: a key or a click then says that a name is needed (a disabled
    # button took the key and said nothing).
    grade_buttons("judge-grade", judge_in_place, lambda grade: (store, state, qid, doc_id, grade), primary_from=1)
    keyed_button(st.button, "Undo", key="judge-undo", shortcut="U", on_click=undo_in_place, args=(store, state))
    st.caption(as_markdown(f"Keys: 0–4 judge this candidate as {name or 'the annotator named above'}"
                                     " · U undo your latest label in this dataset"))

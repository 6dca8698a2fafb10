"""Label: judge (question, candidate) pairs one at a time with one key per grade, undo and skip;
agreement between annotators; a review view where a reviewer settles conflicts.

Widgets and layout only, one module per view in ``pages/label/``; the queue, its leases and the agreement coefficients are
``qa_core.services.labeling`` and the store's (``db/labeling.py``): every judgement is written at once with
history, and two browser sessions are never handed the same pair at once (each session holds its
pair through a lease in the store). Data text is shown as escaped markdown, never as HTML.

A new annotator calibrates first when the dataset asks for it (``qa_core.services.labeling.calibration``):
gold pairs in the graded mode, then their agreement with gold, then real work (key B).

Every action has a key, listed on the page (``KEYS``); ``pages/assets/label_keys.js`` makes sure
focus never stays stuck in a widget: choosing an option, changing a radio button or pressing
Escape hands the keys back to the page, and capital letters work as the small ones.
"""

from __future__ import annotations

import uuid

import streamlit as st

from pages.common.pickers import pick_dataset, require_datasets
from pages.common.scripts import preload_elements
from pages.common.signin import current_actor, open_store
from pages.judging import ANNOTATOR, install_keys
from pages.label.agreement_view import agreement_view
from pages.label.guidelines_view import guidelines_view
from pages.label.queue_view import label_view
from pages.label.review_view import review_view
from pages.label.shared import (
    AGREEMENT,
    CHOICE,
    CONFIG,
    GUIDELINES,
    HOLDER,
    LABEL,
    NAME_ERROR,
    NEW_NAME,
    PAGE_KEYS,
    REVIEW,
    VIEW_KEYS,
    Desk,
    view_keys,
)
from pages.render.markdown import as_markdown
from qa_core.access import Permission
from qa_core.services import labeling
from qa_core.services.labeling import workplace
from qa_core.types import InputError

st.set_page_config(page_title="Label · Rerank Lab", layout="wide")


def take_name() -> None:
    """Text box callback: a typed name becomes the annotator (and the select box's choice) before
    the run, or the page says why it is refused."""
    typed = st.session_state.get("new_annotator", "")
    st.session_state[NAME_ERROR] = None
    if not typed:  # a box emptied again; one of spaces only is refused below, with the reason
        return
    try:
        name = labeling.annotator_name(typed)
    except InputError as error:
        st.session_state[NAME_ERROR] = f"{error}."
        return
    st.session_state[ANNOTATOR] = st.session_state[CHOICE] = name


st.title("Label")
url, store = open_store(show_device=False)
preload_elements("Button", "Checkbox")  # the first pair's grade buttons and toggle, while a name is typed
datasets = require_datasets(store)

# One holder id per browser session: the store leases the pair on screen to it, and undo takes
# back only what this session judged.
st.session_state.setdefault(HOLDER, f"session-{uuid.uuid4().hex}")
left, right = st.columns(2)
dataset = pick_dataset(left, datasets, key="label_dataset", store=store)
actor = current_actor()
if actor.signed_in:  # team mode: a label's annotator is the signed-in user, never a typed name
    right.text_input("Annotator", value=actor.name, disabled=True, key="signed_in_annotator")
    annotator = st.session_state[ANNOTATOR] = actor.name
else:
    remembered = st.session_state.get(ANNOTATOR)
    known = sorted(set(workplace.annotators(store, dataset)) | {remembered} - {None})
    options = [*known, NEW_NAME]
    if st.session_state.get(CHOICE) not in options:
        st.session_state[CHOICE] = remembered if remembered in options else NEW_NAME
    choice = right.selectbox("Annotator", options, key=CHOICE)
    if choice == NEW_NAME:
        right.text_input("Your name", key="new_annotator", placeholder="e.g. alice", on_change=take_name)
        if st.session_state.get(NAME_ERROR):
            right.error(as_markdown(st.session_state[NAME_ERROR]))
    else:
        st.session_state[ANNOTATOR] = choice
    annotator = st.session_state.get(ANNOTATOR) if choice != NEW_NAME else None

# hand back the pair left on screen when the dataset or the annotator changes
workplace.switch_queue(store, st.session_state[HOLDER], st.session_state.get(CONFIG), (dataset, annotator), actor)
st.session_state[CONFIG] = (dataset, annotator)

views = [LABEL, *([AGREEMENT] if actor.may(Permission.SEE_AGREEMENT) else []),
         *([REVIEW] if actor.may(Permission.ADJUDICATE) else []), GUIDELINES]  # an annotator labels and reads
view = st.radio("View", views, horizontal=True, key="label_view", label_visibility="collapsed")
desk = Desk(store, url, dataset, annotator, tuple(views))
if view == LABEL:
    if annotator is None:
        st.info("Choose your name or type a new one to start labelling.")
    else:
        label_view(desk, annotator)
elif view == AGREEMENT:
    agreement_view(desk)
elif view == REVIEW:
    review_view(desk)
else:
    guidelines_view(desk)
install_keys(PAGE_KEYS | view_keys(views) | VIEW_KEYS[view])

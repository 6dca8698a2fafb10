"""The dataset's guidelines and their versions, and the calibration setting: edited by whoever
manages the dataset's annotation."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.common.signin import current_actor
from pages.label.shared import NOTICE, Desk, keys_help
from pages.render.markdown import as_markdown
from qa_core.services.labeling import management
from qa_core.types import InputError


def guidelines_view(desk: Desk) -> None:
    """The dataset's guidelines and their versions; whoever may manage the dataset (an admin in
    team mode, anyone locally) edits them, every save a new version in the store."""
    store, dataset, author = desk.store, desk.dataset, desk.annotator
    history = store.annotation.guideline_history(dataset)
    current = history[-1].text if history else ""
    if not management.may_manage(current_actor()):
        st.info("Only an admin edits the guidelines of a dataset; these are the ones in force.")
        if current:
            st.markdown(current)  # the guidelines' own markdown; Streamlit escapes HTML in it
    else:
        with st.form("guidelines_form", border=False):
            text = st.text_area("Guidelines (markdown)", current, height=300, key=desk.key("guidelines_text"))
            saved = st.form_submit_button("Save as a new version", disabled=author is None)
        if author is None:
            st.info("Choose or type your name above to edit the guidelines.")
        elif saved:
            try:
                guideline = management.save_guidelines(store, dataset, text, author, current_actor())
            except InputError as error:
                st.error(as_markdown(str(error)))
            else:
                st.session_state[NOTICE] = f"Guidelines version {guideline.version} is in force."
                st.rerun()
    calibration_setting(desk)
    notice = st.session_state.pop(NOTICE, None)
    if notice:
        st.success(as_markdown(notice))
    if history:
        st.dataframe(
            pd.DataFrame(
                [{"version": g.version, "author": g.author, "saved": g.created_at, "characters": len(g.text)} for g in reversed(history)]
            ),
            hide_index=True,
            key="guideline_history",
        )
    st.caption("Keys: " + keys_help(desk.views))


def calibration_setting(desk: Desk) -> None:
    """Whether new annotators judge gold pairs first, and how many: the dataset manager's setting."""
    store, dataset, author = desk.store, desk.dataset, desk.annotator
    settings = store.calibration.calibration_settings(dataset)
    st.markdown("**Calibration of new annotators**")
    st.caption(as_markdown(management.calibration_line(settings)))
    if not management.may_manage(current_actor()):
        st.caption("Only an admin changes it.")
        return
    with st.form("calibration_form", border=False):
        enabled = st.checkbox("Calibrate new annotators on gold pairs first", value=settings.enabled, key=desk.key("calibration_on"))
        pairs = st.number_input("Gold pairs", 1, management.MAX_CALIBRATION_PAIRS, settings.pairs, key=desk.key("calibration_size"))
        saved = st.form_submit_button("Save calibration", disabled=author is None)
    if saved and author is not None:
        try:
            management.set_calibration(store, dataset, enabled, int(pairs), author, current_actor())
        except InputError as error:
            st.error(as_markdown(str(error)))
        else:
            st.session_state[NOTICE] = f"Calibration {'on, ' + str(int(pairs)) + ' gold pairs' if enabled else 'off'}."
            st.rerun()

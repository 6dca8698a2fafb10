"""A new annotator's calibration: gold pairs judged first (without seeing gold), then their
agreement with gold, then real work (key B)."""

from __future__ import annotations

from datetime import UTC, datetime

import streamlit as st

from pages.common.signin import current_actor
from pages.judging import grade_buttons, keyed_button
from pages.label.shared import CAL_REPORT, CAL_SHOWN, HOLDER, NOTICE, Desk, keys_help, pair_beside_guidelines
from pages.render.markdown import as_markdown
from qa_core.services.labeling import calibration
from qa_core.types import InputError


def calibrate(cal: calibration.Calibration, record, grade: int) -> None:
    """Button callback: the calibration grade of the gold pair on screen (a late second press writes nothing)."""
    shown = st.session_state.get(CAL_SHOWN)
    if shown is None or shown[0] != record.candidate_id:
        return
    del st.session_state[CAL_SHOWN]
    try:
        last = cal.judge(record, grade, shown[1])
    except InputError as error:
        st.session_state[NOTICE] = f"Not saved: {error}"
        return
    if last:
        st.session_state[CAL_REPORT] = (cal.dataset, cal.annotator)
    st.session_state[NOTICE] = f"Calibration pair {record.qid} / {record.doc_id}: {grade} saved; gold comes at the end."


def begin_work() -> None:
    st.session_state.pop(CAL_REPORT, None)


def calibration_gate(desk: Desk, annotator: str) -> bool:
    """The annotator's calibration instead of the queue while a gold pair is due, then their
    result until they begin real work; ``False`` when neither is on screen."""
    dataset = desk.dataset
    try:
        cal = calibration.Calibration.build(desk.store, dataset, annotator, holder=st.session_state[HOLDER],
                                            actor=current_actor())
    except InputError as error:
        st.error(as_markdown(str(error)))
        return True
    record = cal.current
    if record is None and st.session_state.get(CAL_REPORT) != (dataset, annotator):
        return False
    notice = st.session_state.pop(NOTICE, None)
    if notice:
        st.caption(as_markdown(notice))
    if record is not None:
        if (st.session_state.get(CAL_SHOWN) or (None,))[0] != record.candidate_id:
            st.session_state[CAL_SHOWN] = (record.candidate_id, datetime.now(UTC))
            cal.hold_no_queue_pair()
        st.progress((cal.position - 1) / cal.total, text=f"Calibration: gold pair {cal.position} of {cal.total} · "
                    "every new annotator judges these first; your agreement with gold comes at the end")
        pair_beside_guidelines(desk, record)
        grade_buttons("grade", calibrate, lambda grade: (cal, record, grade), primary_from=1)
        st.caption("Keys: 0–4 judge the gold pair (calibration: no skip or undo, and it never trains a model) · "
                   + keys_help(desk.views))
        return True
    result = cal.result()
    st.subheader("Your calibration against gold")
    exact, kappa, pairs = st.columns(3)
    exact.metric("Exact agreement", f"{result.exact:.0%}")
    kappa.metric("Weighted κ (quadratic)", "—" if result.weighted_kappa is None else f"{result.weighted_kappa:.3f}")
    if result.weighted_kappa is None:  # said apart: a metric's value does not wrap, and this was cut off
        kappa.caption("undefined: no variation")
    pairs.metric("Gold pairs", len(result.pairs))
    st.caption("Gold here is binary (relevant or not): your grade counts as relevant when it is above 0, as "
               "training reads it." if result.binary else "Compared grade for grade with gold (0–4).")
    st.dataframe(calibration.pair_table(result), hide_index=True, key="calibration_pairs")
    keyed_button(st.button, "B · begin labelling", key="begin_work", shortcut="B", on_click=begin_work, type="primary")
    st.caption("Keys: B begin real work · " + keys_help(desk.views))
    return True

"""Pairwise and top-k judging: one key per answer, the pair or pool beside the guidelines."""

from __future__ import annotations

import streamlit as st

from pages.common.signin import current_actor
from pages.judging import keyed_button
from pages.label.shared import (
    HOLDER,
    NOTICE,
    PICKS,
    PREF_SHOWN,
    SKIPPED,
    UNDO_DRAWN,
    Desk,
    guidelines_panel,
    keys_help,
)
from pages.render.markdown import as_markdown
from qa_core.services.labeling import preferences
from qa_core.types import InputError

PAIR_KEYS = {"left": ("1", "left is better"), "right": ("2", "right is better"), "tie": ("3", "tie: equally good"),
             "both_bad": ("0", "both bad")}


MAX_POOL_KEYS = preferences.MAX_POOL


def judge_preference(session: preferences.PreferenceSession, item: tuple[int, ...], outcome: str) -> None:
    """Button callback: the pairwise judgement of the pair on screen (a late second press writes nothing)."""
    if st.session_state.get(PREF_SHOWN) != item:
        return
    del st.session_state[PREF_SHOWN]
    try:
        session.judge_pair(item, outcome)
    except InputError as error:
        st.session_state[NOTICE] = f"Not saved: {error}"
        return
    st.session_state[NOTICE] = f"Judged {session.records[item[0]].qid}: {PAIR_KEYS[outcome][1]}."


def pick(session: preferences.PreferenceSession, item: tuple[int, ...], candidate_id: int | None, k: int) -> None:
    """Button callback: add a pick to the pool on screen (``None``: done, save the picks so far);
    the pool is saved once ``k`` are picked."""
    if st.session_state.get(PREF_SHOWN) != item:
        return
    picked = list(st.session_state.get(PICKS, {}).get(item, []))
    if candidate_id is not None and candidate_id not in picked:
        picked.append(candidate_id)
    if candidate_id is not None and len(picked) < min(k, len(item)):
        st.session_state[PICKS] = {item: picked}
        return
    del st.session_state[PREF_SHOWN]
    st.session_state[PICKS] = {}
    try:
        session.judge_pool(item, picked)
    except InputError as error:
        st.session_state[NOTICE] = f"Not saved: {error}"
        return
    best = ", ".join(str(item.index(c) + 1) for c in picked)
    st.session_state[NOTICE] = f"Judged {session.records[item[0]].qid}: " + (f"picked {best}." if best else "none fits.")


def clear_picks() -> None:
    st.session_state[PICKS] = {}


def skip_preference(session: preferences.PreferenceSession, item: tuple[int, ...]) -> None:
    if st.session_state.pop(PREF_SHOWN, None) == item:
        session.release()
        skipped = [i for i in st.session_state.get(SKIPPED, []) if i != item]
        st.session_state[SKIPPED] = [*skipped, item]
        st.session_state[NOTICE] = f"Skipped {session.records[item[0]].qid}: it comes back at the end."


def undo_preference(session: preferences.PreferenceSession) -> None:
    """Button callback: take back this tab's last judgement; as in the graded queue, a second press
    handled before the next run drew the Undo button takes nothing back, and a refusal is one line."""
    if not st.session_state.pop(UNDO_DRAWN, False):
        return
    st.session_state.pop(PREF_SHOWN, None)
    st.session_state[PICKS] = {}
    try:
        item = session.undo()
    except InputError as error:  # e.g. the role to label was taken away meanwhile
        st.session_state[NOTICE] = f"Not undone: {error}"
        return
    st.session_state[NOTICE] = (
        "Nothing of yours to undo here in this mode."
        if item is None
        else f"Took back your judgement of {session.records[item[0]].qid} (it stays in the history)."
    )


def preference_view(desk: Desk, annotator: str, mode: str, order: str, scores, split: str, depth: int) -> None:
    """Pairwise or top-k judging: one key per answer, the pair or pool shown beside the guidelines."""
    k = st.selectbox("Best k", (1, 2, 3), key="topk_k") if mode == preferences.TOPK else 1
    try:
        session = preferences.PreferenceSession.build(desk.store, desk.dataset, annotator, mode, order, scores=scores,
                                                      split=split, holder=st.session_state[HOLDER], actor=current_actor(),
                                                      depth=depth)
        item = session.current(st.session_state.get(SKIPPED, []))
        done, total = session.progress()
    except InputError as error:
        st.error(as_markdown(str(error)))
        return
    st.progress(done / total if total else 1.0, text=f"{done} of {total} judged by you in this queue")
    notice = st.session_state.pop(NOTICE, None)
    if notice:
        st.caption(as_markdown(notice))
    if item is None:
        st.session_state.pop(PREF_SHOWN, None)
        held = " (the rest is on other sessions' screens right now)" if done < total else ""
        st.success(f"Nothing left for you to judge in this queue{held}.")
    else:
        st.session_state[PREF_SHOWN] = item
        records = [session.records[c] for c in item]
        shown, guide = st.columns([3, 2])
        with shown.container(border=True):
            st.caption(as_markdown(f"{records[0].qid} · {mode}"))
            st.markdown(f"**Question:** {as_markdown(records[0].question)}")
            if mode == preferences.PAIRWISE:
                for column, side, record in zip(st.columns(2), ("1 · Left", "2 · Right"), records):
                    column.markdown(f"**{side}:** {as_markdown(record.candidate)}")
            else:
                picked = st.session_state.get(PICKS, {}).get(item, [])
                marks = {c: f"**[pick {rank}]** " for rank, c in enumerate(picked, 1)}
                st.markdown("\n".join(f"{n}. {marks.get(r.candidate_id, '')}{as_markdown(r.candidate)}"
                                       for n, r in enumerate(records, 1)))
        with guide:
            guidelines_panel(desk.store, desk.dataset, grades=False)  # no grade is judged here
        if mode == preferences.PAIRWISE:
            for column, (outcome, (key, name)) in zip(st.columns(len(PAIR_KEYS)), PAIR_KEYS.items()):
                keyed_button(column.button, f"{key} · {name}", key=f"pair-{outcome}", shortcut=key,
                             on_click=judge_preference, args=(session, item, outcome), width="stretch")
        else:
            picked = st.session_state.get(PICKS, {}).get(item, [])
            for column, (n, record) in zip(st.columns(len(item) + 1), enumerate(records, 1)):
                keyed_button(column.button, f"{n} · pick", key=f"pick-{n}", shortcut=str(n), on_click=pick,
                             args=(session, item, record.candidate_id, k), disabled=record.candidate_id in picked,
                             width="stretch")
            keyed_button(st.button, "0 · done (none fits, or the picks so far)", key="pick-done", shortcut="0",
                         on_click=pick, args=(session, item, None, k))
    left, middle, right, _ = st.columns([1, 1, 1, 2])
    keyed_button(left.button, "Skip", key="skip", shortcut="S", on_click=skip_preference, args=(session, item),
                 disabled=item is None)
    keyed_button(middle.button, "Undo", key="undo", shortcut="U", on_click=undo_preference, args=(session,))
    st.session_state[UNDO_DRAWN] = True
    if mode == preferences.TOPK:
        keyed_button(right.button, "Clear picks", key="clear_picks", shortcut="X", on_click=clear_picks)
    keys = ("1 left better · 2 right better · 3 tie (equally good) · 0 both bad" if mode == preferences.PAIRWISE
            else f"1–{MAX_POOL_KEYS} pick (best first; saved at k picks) · 0 done · X clear picks · K k")
    st.caption(f"Keys: {keys} · S skip · U undo this tab's last judgement · J judging mode · O queue order · "
               + keys_help(desk.views))

"""Label: judge (question, candidate) pairs one at a time with one key per grade, undo and skip;
agreement between annotators; a review view where a reviewer settles conflicts.

Widgets and layout only; the queue, its leases and the agreement coefficients are
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

import json
import uuid
from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from db.calibration import MAX_CALIBRATION_PAIRS
from pages.common.caches import get_questions, get_ranker, show_not_trained
from pages.common.pickers import pick_dataset, require_datasets
from pages.common.scripts import preload_elements
from pages.common.signin import current_actor, open_store
from pages.judging import ANNOTATOR, GRADE_MEANINGS, GRADE_NAMES, Keys, grade_buttons, install_keys, keyed_button
from pages.render.markdown import as_markdown
from qa_core.access import Permission
from qa_core.services import analysis, candidate_pools, labeling, model_loading
from qa_core.services.labeling import calibration, charts, dashboard, preferences, suggestions
from qa_core.types import InputError, NotTrainedError

ORDER_HELP = {
    "random": "a seeded random order",
    "uncertainty": "pairs the model is least sure about first",
    "disagreement": "pairs whose rank differs most between the models first",
    "diversity": "one pair of each question in turn",
}
LABEL, AGREEMENT, REVIEW, GUIDELINES = "Label", "Agreement", "Review conflicts", "Guidelines"
NEW_NAME = "New annotator…"
LABEL_SPLIT = "train"  # the queue's default split (issue 22: never TEST unless chosen)
HOLDER, SHOWN, NOTICE, CONFIG = "label_holder", "label_shown", "label_notice", "label_config"
CHOICE, NAME_ERROR = "annotator_choice", "annotator_name_error"
PAIR_KEYS = {"left": ("1", "left is better"), "right": ("2", "right is better"), "tie": ("3", "tie: equally good"),
             "both_bad": ("0", "both bad")}
MAX_POOL_KEYS = preferences.MAX_POOL
SUGGEST, SUGGESTING = "suggest", "suggest_for"  # the toggle, and {annotator: on} behind it
PREF_SHOWN, PICKS, SKIPPED = "preference_shown", "topk_picks", "preference_skipped"
CAL_SHOWN, CAL_REPORT = "calibration_shown", "calibration_report"  # (gold pair, shown at); (dataset, annotator)
SCORING_REFRESH_SECONDS = 1.0
VIEW_LETTERS = {LABEL: "l", AGREEMENT: "a", REVIEW: "v", GUIDELINES: "g"}


def view_key(position: int) -> str:
    """The view radio button at ``position`` (0-based; Streamlit's radio inputs carry their index)."""
    return f'.st-key-label_view input[type="radio"][value="{position}"]'


PAGE_KEYS: Keys = {
    "d": ([".st-key-label_dataset input"], "focus"),
    "n": ([".st-key-new_annotator input", ".st-key-annotator_choice input"], "focus"),
}
VIEW_KEYS: dict[str, Keys] = {
    LABEL: {
        "o": ([".st-key-order input"], "focus"),
        "m": ([".st-key-order_model input", ".st-key-order_models input"], "focus"),
        "j": ([".st-key-label_mode input"], "focus"),
        "k": ([".st-key-topk_k input"], "focus"),
        "h": ([".st-key-suggest input"], "click"),
    },
    AGREEMENT: {},
    REVIEW: {"f": ([".st-key-conflict input"], "focus"), "h": ([".st-key-review_model_on input"], "click")},
    GUIDELINES: {},
}
PAGE_HELP = "D dataset · N annotator · Esc leaves a box (then keys work again)"


def view_keys(views: list[str]) -> Keys:
    """A letter per view the actor may open, pointing at that view's radio button (a role sees
    fewer views, so positions differ)."""
    return {VIEW_LETTERS[view]: ([view_key(position)], "click") for position, view in enumerate(views)}


def keys_help(views: list[str]) -> str:
    """The page-wide keys as listed under every view."""
    letters = " / ".join(VIEW_LETTERS[view].upper() for view in views)
    return f"{letters} {', '.join(view.split()[0].lower() for view in views)} · {PAGE_HELP}"

st.set_page_config(page_title="Label · Rerank Lab", layout="wide")


@st.cache_resource(show_spinner=False, max_entries=8)
def get_scores(_store, url: str, model: str, dataset: str, model_version: str | None, dataset_version: str):
    """One model's scores of the dataset, filled in by a background thread, for the uncertainty
    and disagreement orders (shared by every session); a new model version or a re-import
    scores again."""
    ranker = get_ranker(_store, url, model, dataset, model_version, dataset_version)  # the pages' shared cache
    return labeling.BackgroundScores(ranker, _store.candidate_rows(dataset))


@st.fragment(run_every=SCORING_REFRESH_SECONDS)
def scoring_progress(jobs: dict[str, labeling.BackgroundScores]) -> None:
    """Scoring progress while the model-based order fills in; one full rerun when it is done."""
    states = {model: job.progress() for model, job in jobs.items()}
    if all(state.done for state in states.values()):
        st.rerun()
    for model, state in states.items():
        st.progress(
            state.scored / state.total if state.total else 1.0,
            text=f"Scoring with {model} for this order: {state.scored} of {state.total} pairs · "
            "labelling goes on meanwhile, scored pairs first",
        )


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


def pair_beside_guidelines(store, dataset: str, record, suggesting: str | None = None) -> None:
    """The pair to judge (with the model suggestion when one is on) beside the dataset's guidelines:
    a queue pair and a calibration pair alike."""
    pair, guide = st.columns([3, 2])
    with pair.container(border=True):
        st.caption(as_markdown(f"{record.qid} · {record.doc_id}"))
        st.markdown(f"**Question:** {as_markdown(record.question)}")
        st.markdown(f"**Candidate:** {as_markdown(record.candidate)}")
        if suggesting:
            show_suggestion(store, dataset, suggesting, record)
    with guide:
        guidelines_panel(store, dataset)


def guidelines_panel(store, dataset: str) -> None:
    """The grade scale and the dataset's guidelines in force, beside the pair (each label records
    the version it was made under)."""
    guideline = store.guidelines(dataset)
    title = "Guidelines" if guideline is None else f"Guidelines (version {guideline.version})"
    with st.expander(title, expanded=True):
        st.markdown("\n".join(f"- **{grade} · {GRADE_NAMES[grade]}**: {meaning}" for grade, meaning in GRADE_MEANINGS.items()))
        if guideline is None:
            st.caption("No guidelines for this dataset yet: whoever manages it writes them in the Guidelines view (G).")
        else:
            st.markdown(guideline.text)  # the guidelines' own markdown; Streamlit escapes HTML in it


def guidelines_view(store, dataset: str, author: str | None) -> None:
    """The dataset's guidelines and their versions; whoever may manage the dataset (an admin in
    team mode, anyone locally) edits them, every save a new version in the store."""
    history = store.guideline_history(dataset)
    current = history[-1].text if history else ""
    if not current_actor().may(Permission.MANAGE_ANNOTATION):
        st.info("Only an admin edits the guidelines of a dataset; these are the ones in force.")
        if current:
            st.markdown(current)  # the guidelines' own markdown; Streamlit escapes HTML in it
    else:
        with st.form("guidelines_form", border=False):
            text = st.text_area("Guidelines (markdown)", current, height=300, key="guidelines_text")
            saved = st.form_submit_button("Save as a new version", disabled=author is None)
        if author is None:
            st.info("Choose or type your name above to edit the guidelines.")
        elif saved:
            try:
                guideline = store.save_guidelines(dataset, text, author, actor=current_actor())
            except InputError as error:
                st.error(as_markdown(str(error)))
            else:
                st.session_state[NOTICE] = f"Guidelines version {guideline.version} is in force."
                st.rerun()
    calibration_setting(store, dataset, author)
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
    st.caption("Keys: " + keys_help(views))


def calibration_setting(store, dataset: str, author: str | None) -> None:
    """Whether new annotators judge gold pairs first, and how many: the dataset manager's setting."""
    settings = store.calibration_settings(dataset)
    st.markdown("**Calibration of new annotators**")
    state = f"on, {settings.pairs} gold pairs" if settings.enabled else "off"
    changed = f"set by {settings.changed_by}" if settings.changed_by else "the default"
    st.caption(as_markdown(
        f"Now {state} ({changed}). An annotator without a calibration record judges the same gold pairs "
        "first, without seeing gold, and sees their agreement with gold before real work."
    ))
    if not current_actor().may(Permission.MANAGE_ANNOTATION):
        st.caption("Only an admin changes it.")
        return
    with st.form("calibration_form", border=False):
        enabled = st.checkbox("Calibrate new annotators on gold pairs first", value=settings.enabled, key="calibration_on")
        pairs = st.number_input("Gold pairs", 1, MAX_CALIBRATION_PAIRS, settings.pairs, key="calibration_size")
        saved = st.form_submit_button("Save calibration", disabled=author is None)
    if saved and author is not None:
        try:
            store.set_calibration(dataset, enabled, int(pairs), author, actor=current_actor())
        except InputError as error:
            st.error(as_markdown(str(error)))
        else:
            st.session_state[NOTICE] = f"Calibration {'on, ' + str(int(pairs)) + ' gold pairs' if enabled else 'off'}."
            st.rerun()


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


def calibration_gate(store, dataset: str, annotator: str) -> bool:
    """The annotator's calibration instead of the queue while a gold pair is due, then their
    result until they begin real work; ``False`` when neither is on screen."""
    try:
        cal = calibration.Calibration.build(store, dataset, annotator, holder=st.session_state[HOLDER],
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
            store.release_claims(dataset, st.session_state[HOLDER], actor=current_actor())  # no queue pair held while calibrating
        st.progress((cal.position - 1) / cal.total, text=f"Calibration: gold pair {cal.position} of {cal.total} · "
                    "every new annotator judges these first; your agreement with gold comes at the end")
        pair_beside_guidelines(store, dataset, record)
        grade_buttons("grade", calibrate, lambda grade: (cal, record, grade), primary_from=1)
        st.caption("Keys: 0–4 judge the gold pair (calibration: no skip or undo, and it never trains a model) · "
                   + keys_help(views))
        return True
    result = cal.result()
    st.subheader("Your calibration against gold")
    exact, kappa, pairs = st.columns(3)
    exact.metric("Exact agreement", f"{result.exact:.0%}")
    kappa.metric("Weighted κ (quadratic)", "— (undefined: no variation)" if result.weighted_kappa is None
                 else f"{result.weighted_kappa:.3f}")
    pairs.metric("Gold pairs", len(result.pairs))
    st.caption("Gold here is binary (relevant or not): your grade counts as relevant when it is above 0, as "
               "training reads it." if result.binary else "Compared grade for grade with gold (0–4).")
    st.dataframe(calibration.pair_table(result), hide_index=True, key="calibration_pairs")
    keyed_button(st.button, "B · begin labelling", key="begin_work", shortcut="B", on_click=begin_work, type="primary")
    st.caption("Keys: B begin real work · " + keys_help(views))
    return True


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
    st.session_state.pop(PREF_SHOWN, None)
    st.session_state[PICKS] = {}
    item = session.undo()
    st.session_state[NOTICE] = (
        "Nothing of yours to undo here in this mode."
        if item is None
        else f"Took back your judgement of {session.records[item[0]].qid} (it stays in the history)."
    )


def preference_view(store, dataset: str, annotator: str, mode: str, order: str, scores, split: str) -> None:
    """Pairwise or top-k judging: one key per answer, the pair or pool shown beside the guidelines."""
    k = st.selectbox("Best k", (1, 2, 3), key="topk_k") if mode == preferences.TOPK else 1
    try:
        session = preferences.PreferenceSession.build(
            store, dataset, annotator, mode, order, scores=scores, split=split, holder=st.session_state[HOLDER],
            actor=current_actor(),
        )
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
            guidelines_panel(store, dataset)
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
    if mode == preferences.TOPK:
        keyed_button(right.button, "Clear picks", key="clear_picks", shortcut="X", on_click=clear_picks)
    keys = ("1 left better · 2 right better · 3 tie (equally good) · 0 both bad" if mode == preferences.PAIRWISE
            else f"1–{MAX_POOL_KEYS} pick (best first; saved at k picks) · 0 done · X clear picks · K k")
    st.caption(f"Keys: {keys} · S skip · U undo this tab's last judgement · J judging mode · O queue order · "
               + keys_help(views))


def remember_suggesting(annotator: str) -> None:
    st.session_state.setdefault(SUGGESTING, {})[annotator] = st.session_state[SUGGEST]


def suggestion_choice(store, dataset: str, annotator: str) -> str | None:
    """The model whose suggestion this annotator asked to see, or ``None``: off by default (a
    suggestion anchors the judgement), on per annotator."""
    st.session_state[SUGGEST] = st.session_state.setdefault(SUGGESTING, {}).get(annotator, False)
    if not st.toggle("Show the model's suggestion (off by default: it can anchor your judgement)", key=SUGGEST,
                     on_change=remember_suggesting, args=(annotator,)):
        return None
    return st.selectbox("Suggesting model", model_loading.model_names(store, dataset), key="suggest_model")


def show_suggestion(store, dataset: str, model: str, record) -> None:
    """The model's score, rank in the pool and weightiest words for the pair on screen."""
    try:
        ranker = get_ranker(store, url, model, dataset, model_loading.model_version_key(store, model, dataset),
                            candidate_pools.dataset_version(store, dataset))
    except NotTrainedError as error:
        show_not_trained(error, model, dataset)
        return
    questions = get_questions(store, url, dataset, candidate_pools.dataset_version(store, dataset))
    question = next(q for q in questions if q.qid == record.qid)
    hint = suggestions.suggest(ranker, model, question, record.doc_id)
    st.info(as_markdown(
        f"{hint.model} suggests: score {hint.score:.3f}, rank {hint.rank} of {hint.pool_size} in this question's pool; "
        f"weightiest words: {', '.join(hint.words) or '-'}"
    ))


def label_view(store, dataset: str, annotator: str) -> None:
    mode = st.selectbox("Judging", list(preferences.MODES), key="label_mode",
                        format_func=lambda m: f"{m}: {preferences.MODES[m]}")
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
    names = model_loading.model_names(store, dataset)
    chosen: list[str] = []
    if order == "uncertainty":
        chosen = [st.selectbox("Model", names, key="order_model")]
    elif order == "disagreement":
        chosen = st.multiselect("Models (two or more)", names, default=names[:2], key="order_models")
    jobs = {}
    for model in chosen:
        try:
            jobs[model] = get_scores(
                store, url, model, dataset, model_loading.model_version_key(store, model, dataset), candidate_pools.dataset_version(store, dataset)
            )
        except NotTrainedError as error:
            show_not_trained(error, model, dataset)
            return
    failed = [f"{model}: {job.progress().error}" for model, job in jobs.items() if job.progress().error]
    if failed:
        st.warning(as_markdown("Scoring stopped early, the rest of the queue is in random order: " + "; ".join(failed)))
    elif jobs and not all(job.progress().done for job in jobs.values()):
        scoring_progress(jobs)
    scores = {model: job.snapshot() for model, job in jobs.items()}
    if mode != preferences.GRADED:
        preference_view(store, dataset, annotator, mode, order, scores, split)
        return
    if calibration_gate(store, dataset, annotator):
        return
    suggesting = suggestion_choice(store, dataset, annotator)
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
    notice = st.session_state.pop(NOTICE, None)
    if notice:
        st.caption(as_markdown(notice))

    if item is None:
        st.session_state.pop(SHOWN, None)
        held = f" ({progress.held_by_others} held by other sessions right now)" if progress.held_by_others else ""
        st.success(f"Nothing left for you to label in this queue{held}.")
    else:
        st.session_state[SHOWN] = item.claim.claim_id
        pair_beside_guidelines(store, dataset, item.record, suggesting)
        grade_buttons("grade", judge, lambda grade: (session, item, grade), primary_from=1)
    left, right, _ = st.columns([1, 1, 3])
    keyed_button(left.button, "Skip", key="skip", shortcut="S", on_click=skip, args=(session, item),
                 disabled=item is None)
    keyed_button(right.button, "Undo", key="undo", shortcut="U", on_click=undo, args=(session,))
    st.caption(
        "Keys: 0–4 judge the pair · S skip · U undo this tab's last label · H model suggestion · J judging mode · O queue order · M model(s) · "
        + keys_help(views)
    )


@st.cache_data(show_spinner="Computing agreement and its confidence intervals…", max_entries=16)
def get_dashboard(_store, url: str, dataset: str, stamp: str) -> dashboard.Dashboard:
    """The agreement dashboard; ``stamp`` (labels, adjudications, timed judgements) says when it
    changed (the bootstrap takes about a second per annotator pair)."""
    return dashboard.store_dashboard(_store, dataset, analysis.question_analyzer(_store))


def coefficient(value: float | None, items: int, enough: bool) -> str:
    if not enough:
        return f"{labeling.NOT_ENOUGH} ({items} shared)"
    return "— (no variation)" if value is None else f"{value:.3f}"


def agreement_view(store, dataset: str, annotator: str | None) -> None:
    stamp = json.dumps(
        [store.current_labels(dataset), sorted(store.adjudications(dataset)), len(store.judgement_times(dataset)),
         len(store.calibration_judgements(dataset))],
        sort_keys=True,
    )
    board = get_dashboard(store, url, dataset, stamp)
    report = board.report
    left, middle, right = st.columns(3)
    left.metric("Annotators", len(report.annotators))
    share = "" if report.overlap_share is None else f" ({report.overlap_share:.0%} of {report.judged} judged)"
    middle.metric("Pairs judged by two or more", f"{report.items_with_overlap}{share}")
    right.metric(
        "Krippendorff's α (ordinal)",
        coefficient(report.alpha, report.items_with_overlap, report.enough),
        help=f"95% bootstrap interval {report.alpha_ci}",
    )
    if report.enough:
        right.caption(f"95% interval {report.alpha_ci}")
    else:
        st.warning(
            f"Not enough overlap: {report.items_with_overlap} pairs were judged by two or more annotators; "
            f"agreement means little below {labeling.MIN_SHARED_PAIRS}. Raise the share of double-annotated "
            "pairs below, or label more."
        )
    overlap_setting(store, dataset, annotator)
    if not board.calibration.empty:
        st.markdown("**Calibration against gold**")
        st.caption("Each annotator's calibration judgements against gold (not labels: they count neither in "
                   "training nor in the agreement above); exact agreement and quadratic-weighted κ (scikit-learn).")
        st.dataframe(board.calibration, hide_index=True, key="calibration_results")
    st.caption("Keys: E export the dashboard as CSV · " + keys_help(views))
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
    tables = st.columns(3)
    for column, (title, table) in zip(
        tables, [("Bias per annotator", board.bias), ("Disagreement per question class", board.by_class),
                 ("Seconds per judgement", board.timing)]
    ):
        column.markdown(f"**{title}**")
        column.dataframe(table, hide_index=True)
    for name, figure in charts.dashboard_figures(board).items():
        st.plotly_chart(figure, key=f"chart-{name}")


def overlap_setting(store, dataset: str, annotator: str | None) -> None:
    """The dataset's share of double-annotated pairs: in the store, so every session draws the same sample."""
    settings = store.annotation_settings(dataset)
    manages = current_actor().may(Permission.MANAGE_ANNOTATION)
    with st.form("overlap_form", border=False):
        share = st.slider(
            "Share of pairs judged by two annotators", 0, 100, round(settings.overlap_share * 100), step=5,
            format="%d%%", key="overlap_share",
        )
        changed = f"set by {settings.changed_by}" if settings.changed_by else "the default"
        st.caption(as_markdown(f"Now {settings.overlap_share:.0%} ({changed}); it applies to pairs not yet judged."))
        if not manages:
            st.caption("Only an admin changes it.")
        if st.form_submit_button("Save share", disabled=annotator is None or not manages) and annotator is not None:
            try:
                store.set_annotation_settings(dataset, share / 100, settings.overlap, annotator, actor=current_actor())
            except InputError as error:
                st.error(as_markdown(str(error)))
            else:
                st.session_state[NOTICE] = f"Share of double-annotated pairs set to {share}%."
                st.rerun()


def settle(store, conflict: labeling.Conflict, grade: int, reviewer: str) -> None:
    """Button callback: the reviewer's final grade of the conflict on screen. Its note belongs to
    this conflict only, so the box is emptied for the next one."""
    note = st.session_state.get("adjudication_note") or None
    try:
        store.adjudicate(conflict.candidate_id, grade, reviewer, note, actor=current_actor())
    except InputError as error:
        st.session_state[NOTICE] = f"Not settled: {error}"
        return
    st.session_state["adjudication_note"] = ""
    st.session_state[NOTICE] = f"Settled {conflict.qid} / {conflict.doc_id} as {grade} ({GRADE_NAMES[grade]})."


def model_as_annotator(store, dataset: str, conflicts: list[labeling.Conflict]) -> list[labeling.Conflict]:
    """With the toggle on, the chosen model's disagreements with the annotators' consensus join
    the conflicts to settle (scored in the background, queued as they are scored)."""
    if not st.toggle("A model as one more annotator", key="review_model_on"):
        return conflicts
    model = st.selectbox("Model", model_loading.model_names(store, dataset), key="review_model")
    try:
        job = get_scores(store, url, model, dataset, model_loading.model_version_key(store, model, dataset),
                         candidate_pools.dataset_version(store, dataset))
    except NotTrainedError as error:
        show_not_trained(error, model, dataset)
        return conflicts
    state = job.progress()
    if not state.done:
        scoring_progress({model: job})
    disagreements = suggestions.model_disagreements(store, dataset, model, job.snapshot())
    st.caption(as_markdown(
        f"{len(disagreements)} pairs where {model} (its first-ranked candidate of each question counts as "
        f"{suggestions.MODEL_RELEVANT}, the rest as 0) disagrees with the annotators' consensus on relevance."
    ))
    known = {c.candidate_id for c in conflicts}
    return conflicts + [d for d in disagreements if d.candidate_id not in known]


def review_view(store, dataset: str, reviewer: str | None) -> None:
    conflicts = model_as_annotator(store, dataset, labeling.conflicts(store, dataset))
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
    st.text_input("Note (optional)", key="adjudication_note")
    party = reviewer is not None and reviewer in conflict.labels
    if reviewer is None:
        st.info("Choose or type your name above to settle conflicts as a reviewer.")
    elif party:
        st.warning(as_markdown(f"You ({reviewer}) labelled this pair: another reviewer settles it."))
    grade_buttons("settle", settle, lambda grade: (store, conflict, grade, reviewer), disabled=reviewer is None or party)
    st.caption("Keys: 0–4 settle the conflict shown with that final grade · F conflict list · H model as an annotator · " + keys_help(views))


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
    known = sorted({name for judged in store.current_labels(dataset).values() for name in judged} | {remembered} - {None})
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

previous = st.session_state.get(CONFIG)
if previous is not None and previous != (dataset, annotator):
    store.release_claims(previous[0], st.session_state[HOLDER], actor=actor)  # hand back the pair left on screen
st.session_state[CONFIG] = (dataset, annotator)

views = [LABEL, *([AGREEMENT] if actor.may(Permission.SEE_AGREEMENT) else []),
         *([REVIEW] if actor.may(Permission.ADJUDICATE) else []), GUIDELINES]  # an annotator labels and reads
view = st.radio("View", views, horizontal=True, key="label_view", label_visibility="collapsed")
if view == LABEL:
    if annotator is None:
        st.info("Choose your name or type a new one to start labelling.")
    else:
        label_view(store, dataset, annotator)
elif view == AGREEMENT:
    agreement_view(store, dataset, annotator)
elif view == REVIEW:
    review_view(store, dataset, annotator)
else:
    guidelines_view(store, dataset, annotator)
install_keys(PAGE_KEYS | view_keys(views) | VIEW_KEYS[view])

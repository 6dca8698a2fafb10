"""What the Label page's views share: session keys, the keyboard map, the pair beside the
guidelines, a model's suggestion and the background scoring behind the model-based orders."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st

from pages.common.caches import get_questions, get_ranker, load_ranker, show_not_trained
from pages.judging import GRADE_MEANINGS, GRADE_NAMES, Keys
from pages.render.markdown import as_markdown
from qa_core.services import candidate_pools, labeling, model_loading
from qa_core.services.datasets import Store
from qa_core.services.labeling import suggestions
from qa_core.types import InputError, NotTrainedError

LABEL, AGREEMENT, REVIEW, GUIDELINES = "Label", "Agreement", "Review conflicts", "Guidelines"
NEW_NAME = "New annotator…"
HOLDER, SHOWN, NOTICE, CONFIG = "label_holder", "label_shown", "label_notice", "label_config"
CHOICE, NAME_ERROR = "annotator_choice", "annotator_name_error"
SUGGEST, SUGGESTING = "suggest", "suggest_for"  # the toggle, and {annotator: on} behind it
PREF_SHOWN, PICKS, SKIPPED = "preference_shown", "topk_picks", "preference_skipped"
UNDO_DRAWN = "label_undo_drawn"  # set by each run that draws an Undo button, ended by its press
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


def view_keys(views: Sequence[str]) -> Keys:
    """A letter per view the actor may open, pointing at that view's radio button (a role sees
    fewer views, so positions differ)."""
    return {VIEW_LETTERS[view]: ([view_key(position)], "click") for position, view in enumerate(views)}


def keys_help(views: Sequence[str]) -> str:
    """The page-wide keys as listed under every view."""
    letters = " / ".join(VIEW_LETTERS[view].upper() for view in views)
    return f"{letters} {', '.join(view.split()[0].lower() for view in views)} · {PAGE_HELP}"


@dataclass(frozen=True)
class Desk:
    """What every view of the Label page works on: the store (its URL keys the server's caches), the
    dataset, the annotator (``None`` until one is chosen) and the views the actor may open."""

    store: Store
    url: str
    dataset: str
    annotator: str | None
    views: tuple[str, ...]

    def key(self, name: str) -> str:
        """The key of a widget that edits this dataset's setting: a keyed widget keeps what it
        holds when only its ``value=`` changes, so under one key a switch of dataset would show
        the old dataset's setting, and a save would store it as the new one's."""
        return f"{name}:{self.dataset}"

    def scores(self, model: str) -> labeling.BackgroundScores:
        """``model``'s background scores of the dataset (``NotTrainedError`` without a version)."""
        store, dataset = self.store, self.dataset
        version = model_loading.current_version(store, model, dataset)  # the one read of the version in use
        return get_scores(store, self.url, model, dataset, version.key, candidate_pools.dataset_version(store, dataset),
                          version)


@st.cache_resource(show_spinner=False, max_entries=8)
def get_scores(_store, url: str, model: str, dataset: str, model_version: str | None, dataset_version: str,
               _version: model_loading.VersionInUse | None = None):
    """One model's scores of the dataset, filled in by a background thread, for the uncertainty
    and disagreement orders (shared by every session); a new model version or a re-import
    scores again."""
    ranker = get_ranker(_store, url, model, dataset, model_version, dataset_version, _version)  # the pages' shared cache
    return labeling.BackgroundScores.of_dataset(ranker, _store, dataset)


def model_as_annotator_scores(desk: Desk, toggle: str, key: str) -> tuple[str, labeling.BackgroundScores] | None:
    """With the ``toggle`` on, the model or system chosen in box ``key`` and its background scores
    (their progress drawn while they fill in); ``None`` while it is off or the model is untrained."""
    if not st.toggle(toggle, key=f"{key}_on"):
        return None
    model = st.selectbox("Model or system", model_loading.model_names(desk.store, desk.dataset), key=key)
    try:
        job = desk.scores(model)
    except NotTrainedError as error:
        show_not_trained(error, model, desk.dataset)
        return None
    except InputError as error:  # e.g. a system removed since the box was drawn
        st.error(as_markdown(str(error)))
        return None
    if not job.progress().done:
        scoring_progress({model: job})
    return model, job


@st.fragment(run_every=SCORING_REFRESH_SECONDS)
def scoring_progress(jobs: dict[str, labeling.BackgroundScores]) -> None:
    """Scoring progress while the model-based order fills in; one full rerun when it is done."""
    states = {model: job.progress() for model, job in jobs.items()}
    if all(state.done for state in states.values()):
        st.rerun()
    for model, state in states.items():
        st.progress(
            state.scored / state.total if state.total else 1.0,
            text=as_markdown(f"Scoring with {model} for this order: {state.scored} of {state.total} pairs · "
                             "labelling goes on meanwhile, scored pairs first"),
        )


def pair_beside_guidelines(desk: Desk, record, suggesting: str | None = None) -> None:
    """The pair to judge (with the model suggestion when one is on) beside the dataset's guidelines:
    a queue pair and a calibration pair alike."""
    pair, guide = st.columns([3, 2])
    with pair.container(border=True):
        st.caption(as_markdown(f"{record.qid} · {record.doc_id}"))
        st.markdown(f"**Question:** {as_markdown(record.question)}")
        st.markdown(f"**Candidate:** {as_markdown(record.candidate)}")
        if suggesting:
            show_suggestion(desk, suggesting, record)
    with guide:
        guidelines_panel(desk.store, desk.dataset)


GUIDELINES_HEIGHT = 220  # px: the grade, skip and undo buttons under the pair stay in view at 1280x1000 (issue 45)
GUIDELINES_KEY = "guidelines_panel"
# The guidelines' own headings at the size of bold text: a "# Heading" first drew a title as large as
# the page's, and the two-fifths column it sits in pushed the grade buttons below the fold.
SMALL_HEADINGS = (f"<style>.st-key-{GUIDELINES_KEY} :is(h1, h2, h3, h4, h5, h6) "
                  "{font-size: 1rem; font-weight: 600; padding: 0.5rem 0 0.25rem;}</style>")


def guidelines_panel(store, dataset: str, grades: bool = True) -> None:
    """The grade scale (``grades``: the graded mode's; pairwise and top-k judge no grade) and the
    dataset's guidelines in force, beside the pair (each label records the version it was made
    under). The panel scrolls within a fixed height, its headings small, so that guidelines of any
    length never push the buttons under the pair out of view."""
    guideline = store.annotation.guidelines(dataset)
    title = "Guidelines" if guideline is None else f"Guidelines (version {guideline.version})"
    with st.expander(title, expanded=True), st.container(height=GUIDELINES_HEIGHT, border=False, key=GUIDELINES_KEY):
        if guideline is None:
            st.caption("No guidelines for this dataset yet: whoever manages it writes them in the Guidelines view (G).")
        else:  # first: what this dataset's lead wrote; the scale below it is the same everywhere
            st.markdown(guideline.text)  # the guidelines' own markdown; Streamlit escapes HTML in it
        if grades:
            st.markdown("\n".join(f"- **{grade} · {GRADE_NAMES[grade]}**: {meaning}"
                                   for grade, meaning in GRADE_MEANINGS.items()))
    st.html(SMALL_HEADINGS)


def show_suggestion(desk: Desk, model: str, record) -> None:
    """The model's score, rank in the pool and weightiest words for the pair on screen."""
    store, dataset = desk.store, desk.dataset
    try:
        ranker = load_ranker(store, desk.url, model, dataset)
    except NotTrainedError as error:
        show_not_trained(error, model, dataset)
        return
    questions = get_questions(store, desk.url, dataset, candidate_pools.dataset_version(store, dataset))
    question = next(q for q in questions if q.qid == record.qid)
    hint = suggestions.suggest(ranker, model, question, record.doc_id)
    st.info(as_markdown(
        f"{hint.model} suggests: score {hint.score:.3f}, rank {hint.rank} of {hint.pool_size} in this question's pool; "
        f"weightiest words: {', '.join(hint.words) or '-'}"
    ))

"""The choices every page starts with, remembered across pages: dataset, model, the clean-questions
switch, the label rule, and the typed-or-picked question; plus the blank cell of a missing value."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from pages.collection import whole_collection_toggle
from pages.common.caches import get_questions
from pages.render.markdown import as_markdown
from qa_core.services import candidate_pools, index_builds, model_loading
from qa_core.services.datasets import Store
from qa_core.services.evaluation_labels import DESCRIPTIONS, LabelRule
from qa_core.types import Candidate, InputError

TYPED, PICKED = "Type a question", "Pick a dataset question"
NO_DATASETS = "No datasets in the store. Import one with `python -m qa_core data import PATH --name NAME`."
LAST_DATASET, LAST_MODEL, LAST_CLEAN = "last_dataset", "last_model", "last_clean"
# Per dataset (``_remember``): LAST_MODEL, how many models the user chose for it (a model box changed, or a
# link) and the last; LAST_COMPARED, that count when pick_models last drew its models, and the models
LAST_COMPARED = "last_compared"
# question_input's choices: typed or picked, the typed text, BM25's k, and per dataset the picked qid
LAST_SOURCE, LAST_TYPED, LAST_K, LAST_PICKED = "last_source", "last_typed", "last_k", "last_picked"


def pick_dataset(container, datasets: Sequence[str], key: str, store: Store | None = None) -> str:
    """The dataset select box of a page, starting on the dataset last used: on any page of this
    session (pages keep their own widget keys, which Streamlit forgets on leaving the page), else,
    in a fresh tab, the one a model was last trained on or promoted for (docs/architecture.md,
    "What a page shows")."""
    chosen = st.session_state.get(key)
    if chosen not in datasets:
        remembered = st.session_state.get(LAST_DATASET)
        if remembered not in datasets and store is not None:
            remembered = model_loading.last_used_dataset(store, datasets)
        chosen = remembered if remembered in datasets else datasets[0]
    _keep_choice(key, chosen)
    dataset = container.selectbox("Dataset", datasets, key=key)
    st.session_state[LAST_DATASET] = dataset
    return dataset


def pick_model(container, store: Store, dataset: str, key: str, options: Sequence[str] | None = None) -> str:
    """A page's model select box over ``options`` (default: every model, those ready for ``dataset``
    first). It starts on the model last chosen for ``dataset`` in this session (on any page, by hand
    or by a link), else the store's last trained or promoted, and goes there again when the dataset
    changes, so another dataset's choice never carries over; the version in use is said under it.
    Only the user's change of the box counts as a choice (``_count_pick``): the default it opens on
    does not, so merely visiting a page changes no other page's choice."""
    options = list(options) if options is not None else model_loading.model_names(store, dataset)
    chosen = _drawn_for(key, dataset)
    if chosen not in options:
        chosen = _model_picks(dataset)[1]
    if chosen not in options:
        chosen = model_loading.default_model(store, options, dataset)
    _keep_choice_for(key, dataset, chosen)
    model = container.selectbox("Model", options, key=key, on_change=_count_pick, args=(key, dataset))
    container.caption(as_markdown(model_loading.version_in_use(store, model, dataset)))
    return model


def pick_models(container, store: Store, dataset: str, names: Sequence[str], extra: Sequence[str], key: str,
                most: int, **box: Any) -> list[str]:
    """A page's models to compare: a multiselect over ``names`` and ``extra`` (say, fused runs) of at most
    ``most``. It starts on the model last chosen for ``dataset`` on another page of this session, then
    ``model_loading.default_models``'s ``most`` - 1 (so that model fits: Compare's three at most give
    two defaults); coming back, it shows this page's own choice for ``dataset`` again unless a model
    was chosen for it elsewhere meanwhile. Another dataset's choice never carries over."""
    picks, last_used = _model_picks(dataset)
    chosen = _drawn_for(key, (dataset, picks))
    if chosen is None:
        kept = _recalled(LAST_COMPARED, dataset)
        chosen = (kept[1] if kept is not None and kept[0] == picks
                  else model_loading.default_models(store, names, dataset, most - 1, last_used=last_used))
    _keep_choice_for(key, (dataset, picks), [model for model in chosen if model in names or model in extra])
    models = container.multiselect(options=[*names, *extra], max_selections=most, key=key, **box)
    _remember(LAST_COMPARED, dataset, (picks, models))
    return models


def _drawn_for(key: str, scope: Hashable) -> Any | None:
    """The value of the box ``key`` if it was last given a choice for ``scope`` (``_keep_choice_for``:
    the dataset its options come from, with what else makes a value stale), else None."""
    return st.session_state.get(key) if st.session_state.get(f"{key}__for") == scope else None


def _keep_choice_for(key: str, scope: Hashable, value: Any) -> None:
    """``_keep_choice``, noting the scope the choice is for (read by ``_drawn_for``)."""
    _keep_choice(key, value)
    st.session_state[f"{key}__for"] = scope


def _recalled(last: str, dataset: str | None) -> Any | None:
    """What ``_remember`` kept under ``last`` for ``dataset``, else None. With ``_drawn_for``, the one
    rule of every remembered choice (model, models, picked question): each dataset its own, another
    dataset's never carries over, and leaving a dataset for another forgets neither."""
    return st.session_state.get(last, {}).get(dataset)


def _remember(last: str, dataset: str | None, value: Any) -> None:
    """Keep ``value`` under ``last`` for ``dataset`` (a plain session key: Streamlit forgets a page's
    widget values when the page is left)."""
    st.session_state[last] = {**st.session_state.get(last, {}), dataset: value}


def _model_picks(dataset: str | None) -> tuple[int, str | None]:
    """How many models the user chose for ``dataset`` in this session, and the last one."""
    return _recalled(LAST_MODEL, dataset) or (0, None)


def _count_pick(key: str, dataset: str | None) -> None:
    """The user chose the model in the box ``key`` for ``dataset`` (the box's ``on_change``, or a
    link): remember it for every page, and count it, which tells Compare that a model was chosen
    elsewhere (``pick_models``)."""
    _remember(LAST_MODEL, dataset, (_model_picks(dataset)[0] + 1, st.session_state[key]))


def _keep_choice(key: str, value: Any) -> None:
    """Give the box ``key`` the choice ``value`` on every run, not only when the choice changes.
    Pages share these boxes' keys, but each page's box is a new widget (Streamlit's widget ids
    include the page), which opens on its first option; during the first run on the new page,
    ``st.session_state[key]`` still reads the previous page's box. So a choice that reached Ask's box
    from a link (``preset_model``), never touched in the browser, read as chosen on Errors and was
    then shown as the first option (bm25): only the write makes it the new box's value."""
    st.session_state[key] = value


def preset_model(key: str, dataset: str | None, model: str) -> None:
    """Choose ``model`` in ``pick_model``'s box ``key`` for ``dataset`` before it is drawn (a link):
    a choice of the user's, as one made in the box."""
    _keep_choice_for(key, dataset, model)
    _count_pick(key, dataset)


def preset_question(dataset: str | None, dataset_version: str | None, index: int) -> None:
    """Pick the question at ``index`` of ``dataset`` (as of ``dataset_version``) in ``question_input``'s
    box before it is drawn (a link)."""
    st.session_state["source"] = PICKED
    _keep_choice_for("picked", (dataset, dataset_version), index)


def _remembered(key: str, last: str, allowed: Callable[[Any], bool], default: Any, draw: Callable[[], Any]) -> Any:
    """The widget ``draw`` draws with key ``key``, on this page's value, else the one it last had on
    any page (the plain key ``last``: Streamlit forgets a widget's value when its page is left), else
    ``default``; a value that is not ``allowed`` is skipped."""
    current, remembered = st.session_state.get(key), st.session_state.get(last)
    _keep_choice(key, current if allowed(current) else remembered if allowed(remembered) else default)
    value = draw()
    st.session_state[last] = value
    return value


CLEAN_LABEL = "Clean questions only"
CLEAN_HELP = ("Only questions with a correct and a wrong candidate: the WikiQA/TrecQA \"clean\" convention, "
              "as `--clean` on the command line. Off (the default), every question with labels counts, and one "
              "without a correct candidate scores 0.")


def pick_clean(container, key: str) -> bool:
    """The question set every metric of a page is computed over: every question with labels (the
    default, as the CLI's ``evaluate`` and trec_eval) or the clean ones. One control with one
    default on every page, and the choice carries over between pages, so the same model and split
    give the same number on Compare, Errors and the command line."""
    if key not in st.session_state:
        st.session_state[key] = st.session_state.get(LAST_CLEAN, False)
    clean = container.toggle(CLEAN_LABEL, key=key, help=CLEAN_HELP)
    st.session_state[LAST_CLEAN] = clean
    return clean


def question_set(clean: bool, questions: int, split: str) -> str:
    """The question set a number was computed over, said beside it."""
    return f"{questions} {'clean ' if clean else ''}questions ({split}{'' if clean else ', clean off'})"


def require_datasets(store: Store) -> list[str]:
    """The store's dataset names; an empty store says how to import one and stops the page."""
    names = store.datasets.dataset_names()
    if not names:
        st.info(NO_DATASETS)
        st.stop()
    return names


ChosenQuestion = tuple[str, Sequence[Candidate], str | None]


def question_input(store: Store, url: str, dataset: str, dataset_version: str) -> Callable[[], ChosenQuestion]:
    """The typed-or-picked question widgets (keys ``source``, ``question``, ``k``, ``picked``). They
    start on their values last used on any page (Ask and Compare share them), the picked question
    per dataset (by qid: another dataset's, or another version's position, never carries over). The
    returned function, called when the page's button is clicked, gives the checked question, its
    candidates (BM25's top k, or the dataset question's own pool) and its qid (``None`` when typed);
    it raises ``InputError`` on a bad question."""
    source = _remembered("source", LAST_SOURCE, lambda value: value in (TYPED, PICKED), TYPED, lambda: st.radio(
        "Question", [TYPED, PICKED], horizontal=True, key="source", label_visibility="collapsed"))
    if source == TYPED:
        typed = _remembered("question", LAST_TYPED, lambda value: isinstance(value, str), "", lambda: st.text_input(
            "Your question", key="question", placeholder="e.g. who discovered penicillin"))
        k = int(_remembered("k", LAST_K, lambda value: value is not None, candidate_pools.DEFAULT_CANDIDATES,
                            lambda: st.number_input("BM25 candidates to rerank", min_value=1, max_value=1000, key="k")))
        whole = whole_collection_toggle(store, dataset)

        def chosen() -> ChosenQuestion:
            question = candidate_pools.check_question(typed)
            return question, index_builds.typed_candidates(store, dataset, question, k=k, whole=whole), None

        return chosen
    questions = get_questions(store, url, dataset, dataset_version)
    # The box's position holds within one version of the dataset; another dataset or version (a
    # re-import may reorder the questions) goes by the qid last picked on the dataset.
    scope = (dataset, dataset_version)
    picked = _drawn_for("picked", scope)
    if picked not in range(len(questions)):
        qid = _recalled(LAST_PICKED, dataset)
        picked = next((i for i, question in enumerate(questions) if question.qid == qid), 0 if questions else None)
    _keep_choice_for("picked", scope, picked)
    picked = st.selectbox(
        "Dataset question",
        range(len(questions)),
        format_func=lambda i: f"{questions[i].qid} [{questions[i].split}] {questions[i].text}",
        key="picked",
    )
    if picked is not None:
        _remember(LAST_PICKED, dataset, questions[picked].qid)

    def chosen() -> ChosenQuestion:
        if picked is None:
            raise InputError(f"dataset {dataset!r} has no questions to pick")
        return questions[picked].text, questions[picked].candidates, questions[picked].qid

    return chosen


def blank_missing(values: Sequence[Any], fmt: str = "{}") -> list[str]:
    """A column's values as text, a missing one as a blank cell: Streamlit writes "None" for a missing
    number whatever the column's format. For columns that still sort right as text (grades, decimals
    in [0, 1])."""
    return ["" if pd.isna(value) else fmt.format(value) for value in values]


def pick_label_rule(container, key: str) -> LabelRule:
    """The labels a page's metrics are computed against (default gold), with the rule spelled out."""
    rule = container.radio("Labels", list(LabelRule), key=key, horizontal=True,
                           format_func=lambda r: {LabelRule.GOLD: "gold", LabelRule.TRAINING: "training-label rule"}[r],
                           help=" ".join(f"{r.value}: {text}." for r, text in DESCRIPTIONS.items()))
    return LabelRule(rule)

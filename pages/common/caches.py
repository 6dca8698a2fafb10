"""What the server keeps for every session: one store per URL, loaded rankers (per model version and
dataset import), loaded datasets and whole-split runs; a new version or a re-import loads afresh.
Rankers and datasets are bounded by settings (``config.max_models``, ``config.max_datasets``, read
when the server starts): Streamlit's resource cache drops the least recently used beyond them."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import streamlit as st

from pages.render.markdown import as_markdown
from qa_core import config
from qa_core.evaluation import Run
from qa_core.rankers.base import Ranker
from qa_core.services import candidate_pools, experiments, model_loading, store_setup
from qa_core.services.datasets import Store
from qa_core.types import InputError, NotTrainedError, Question

RUNS_KEPT = 32  # whole-split runs the server keeps, per (model version, dataset import, split)


@st.cache_resource(show_spinner="Opening the store…")
def get_store(url: str, team: bool = False) -> Store:
    """One store per URL (and mode) for the whole server; the demo corpus is imported into an empty one."""
    store = store_setup.open_store(url, team=team)
    try:
        store_setup.ensure_demo(store)
    except InputError as error:  # e.g. a full or read-only disk: say which store, as opening does
        store.close()  # not cached: the next rerun opens it again
        raise InputError(f"cannot import the demo corpus into the store at {store_setup.masked_url(url)}: {error}") from None
    return store


@st.cache_resource(show_spinner="Loading the model…", max_entries=config.max_models())
def get_ranker(_store, url: str, model: str, dataset: str, model_version: str | None, dataset_version: str,
               _version: model_loading.VersionInUse | None = None):
    """Rankers are shared by all sessions; a new model version or a re-import loads a new one.
    ``_version``: what ``model_version`` is the key of, when the caller read it (not part of the key)."""
    return model_loading.load_ranker(_store, model, dataset, version=_version)


def load_ranker(store: Store, url: str, model: str, dataset: str) -> Ranker:
    """``model``'s current version for ``dataset``, through ``get_ranker``'s cache."""
    version = model_loading.current_version(store, model, dataset)  # the one read of the version in use
    return get_ranker(store, url, model, dataset, version.key, candidate_pools.dataset_version(store, dataset), version)


def current_ranker(store: Store, url: str, model: str, dataset: str) -> Ranker | None:
    """``load_ranker``, or ``None`` after the page says why the model cannot be loaded."""
    try:
        return load_ranker(store, url, model, dataset)
    except NotTrainedError as error:
        show_not_trained(error, model, dataset)
    except InputError as error:
        st.error(as_markdown(str(error)))
    return None


def show_not_trained(error: NotTrainedError, model: str, dataset: str) -> None:
    """The error and the command that trains the model."""
    st.info(as_markdown(str(error)))
    st.code(model_loading.train_command(model, dataset), language="bash")


@st.cache_resource(show_spinner="Loading the dataset…", max_entries=config.max_datasets())
def get_questions(_store, url: str, dataset: str, dataset_version: str):
    """The dataset's questions with their own pools and gold labels, in import order: loaded once
    per import for the whole server."""
    return _store.datasets.load_dataset(dataset).questions


@st.cache_resource
def _split_runs() -> OrderedDict:
    """The server's whole-split runs, newest last (a plain LRU: ``st.cache_data`` would replay the
    progress bar instead of showing it)."""
    return OrderedDict()


def split_run(store: Store, url: str, model: str, dataset: str, split: str, questions: Sequence[Question]) -> Run:
    """``model``'s run over ``questions`` (a whole split), computed once per (model version, dataset
    import, split) for the whole server, with a progress bar while it is scored by the ranker of
    the version its key names (one read of the version in use, as ``load_ranker``)."""
    version = model_loading.current_version(store, model, dataset)
    dataset_version = candidate_pools.dataset_version(store, dataset)
    key = (url, model, version.key, dataset, dataset_version, split)
    runs = _split_runs()
    if key in runs:
        runs.move_to_end(key)
        return runs[key]
    ranker = get_ranker(store, url, model, dataset, version.key, dataset_version, version)
    bar = st.progress(0.0, text=as_markdown(f"Scoring {model} on {split}…"))

    def progress(done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=as_markdown(f"Scoring {model} on {split}: {done:,} of {total:,} questions"))

    try:  # a service that fails part way leaves no half-filled bar
        run = experiments.score_questions(ranker, questions, progress)
    finally:
        bar.empty()
    runs[key] = run
    while len(runs) > RUNS_KEPT:
        runs.popitem(last=False)
    return run

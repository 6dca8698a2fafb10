"""Which model a page starts on and which version of it scores a dataset: the registered models
(those ready for a dataset first), what was last used, the version in use said in one line, the
cache key that changes with it, and the ranker loaded ready to score.

No Streamlit here: the pages cache the rankers these load, keyed by ``current_version(...).key``.
"""

from __future__ import annotations

import shlex
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from qa_core.rankers import registry
from qa_core.rankers.base import Ranker
from qa_core.services import systems
from qa_core.types import InputError, NotTrainedError

if TYPE_CHECKING:  # imported where used: the CLI starts without loading the store
    from db.store import Store
    from qa_core.services.jobs import LoadedModel


def model_names(store: Store | None = None, dataset: str | None = None) -> list[str]:
    """Registered models; with a store and a dataset, those ready to score it first (baselines,
    models trained on or promoted for it), so that a page's default choice works on a fresh store."""
    names = registry.available()
    if store is None or dataset is None:
        return names + (systems.names(store, None) if store is not None else [])  # every system of the store

    def ready(name: str) -> bool:
        return not registry.ranker_class(name).capabilities.trainable or store.models.promoted_model(name, dataset) is not None

    return sorted(names, key=lambda name: (not ready(name), name)) + systems.names(store, dataset)  # then the systems


def _naive_utc(when: datetime) -> datetime:
    """A stored time comparable with any other (the store keeps UTC; a driver may add the zone)."""
    return when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo is not None else when


def usage(store: Store) -> list[tuple[datetime, str, str]]:
    """``(when, dataset, model)`` of what was done with a model on a dataset, newest first: versions
    registered (the dataset trained on), promotions (the dataset promoted for) and the newest
    training jobs. What "last used" means on every page (docs/architecture.md, "What a page shows")."""
    events = []
    for version in store.models.model_versions():
        trained_on = (version["training_data"] or {}).get("dataset")
        if trained_on:
            events.append((_naive_utc(version["created_at"]), trained_on, version["name"]))
        for scope in version["promoted_for"]:
            history = store.models.promotion_history(version["name"], scope)
            if history and history[0].get("promoted_at") is not None:
                events.append((_naive_utc(history[0]["promoted_at"]), scope, version["name"]))
    events += [(_naive_utc(job["created_at"]), job["dataset"], job["model"]) for job in store.jobs.jobs(limit=5)]
    return sorted(events, key=lambda event: event[0], reverse=True)


def last_used_dataset(store: Store, datasets: Sequence[str]) -> str | None:
    """The one of ``datasets`` a model was last trained on, promoted for or queued for (else None)."""
    return next((dataset for _, dataset, _ in usage(store) if dataset in datasets), None)


def default_model(store: Store, names: Sequence[str], dataset: str | None = None) -> str | None:
    """The one of ``names`` last used (trained, promoted, queued; on ``dataset`` when given): what
    the user last put to work; else the first of ``names``."""
    used = (model for _, on, model in usage(store) if model in names and dataset in (None, on))
    return next(used, names[0] if names else None)


def default_models(store: Store, names: Sequence[str], dataset: str, count: int,
                   last_used: str | None = None) -> list[str]:
    """The models of ``names`` to compare first: ``count`` of them, the trained models ``dataset`` has a
    version of, last used first, then the baselines (Compare starts on trained models when they
    exist); and ``last_used`` (a session's model on another page), when one of ``names``, first. It
    takes none of the ``count`` places: when it is not among them, ``count`` + 1 names come back (so
    Compare, three models at most, asks for two)."""
    trained = [name for name in names if not systems.is_system(name) and registry.ranker_class(name).capabilities.trainable
               and store.models.promoted_model(name, dataset) is not None]
    used = [model for _, on, model in usage(store) if on == dataset and model in trained]
    ordered = list(dict.fromkeys([*used, *trained, *names]))
    first = [last_used] if last_used in names else []
    return list(dict.fromkeys([*first, *ordered[:count]]))


def train_command(name: str, dataset: str | None = None) -> str:
    """The command line that trains ``name`` on ``dataset``, ready to paste into a shell: each name
    quoted (a dataset name may hold spaces or ``;``)."""
    data = shlex.quote(dataset) if dataset else "DATASET"
    return f"python -m qa_core train --model {shlex.quote(name)} --data {data}"


@dataclass(frozen=True)
class VersionInUse:
    """What scores a dataset for a model now, read once. ``key`` is what a page keys its caches by:
    it changes when a version is trained or promoted, or when a system's run file, URL or service
    version changes (``None`` where nothing versions the model: a baseline, a checkpoint file).
    ``record``: a trained version's record, which ``load_ranker`` loads without asking again."""

    key: str | None = None
    record: Mapping[str, Any] | None = None


def current_version(store: Store, name: str, dataset: str) -> VersionInUse:
    """The version of ``name`` that would score ``dataset`` now, keyed by its own source: a system
    by its provenance (``systems.version_key``), a trainable model by the version record ``dataset``
    uses (``store.models.promoted_model``: its id and checkpoint)."""
    if systems.is_system(name):
        return VersionInUse(systems.version_key(store, name))
    if looks_like_path(name) or not registry.ranker_class(name).capabilities.trainable:
        return VersionInUse()
    record = store.models.promoted_model(name, dataset)
    return VersionInUse(None if record is None else f"{record['id']}:{record['checkpoint_path']}", record)


def version_in_use(store: Store, name: str, dataset: str) -> str:
    """One line for a page: which version of ``name`` scores ``dataset`` and what it was trained on."""
    if looks_like_path(name):
        return f"checkpoint {name}"
    if systems.is_system(name):
        return systems.describe(store, name)
    capabilities = registry.ranker_class(name).capabilities
    if not capabilities.trainable:
        fitted = (f"; IDF from {dataset}'s training split" if capabilities.learns_statistics
                  else "; statistics (IDF) from the pool it reranks" if capabilities.pool_dependent else "")
        return f"{name}: nothing to train{fitted}"
    record = store.models.promoted_model(name, dataset)
    if record is None:
        return f"{name}: no version trained on or promoted for {dataset}"
    data = record["training_data"] or {}
    trained = data.get("dataset") or "its own data"
    seed = f", seed {data['seed']}" if data.get("seed") is not None else ""
    why = f"promoted for {dataset}" if record["promoted"] else f"the newest trained on {dataset} (none promoted)"
    return f"{name} version {record['version']} · trained on {trained}{seed} · {why}"


def load_ranker(store: Store, name: str, dataset: str | None = None, *, version: VersionInUse | None = None) -> Ranker:
    """A ready-to-score ranker for ``dataset``, by registered name or checkpoint path; ``version``:
    what ``current_version`` returned, when the caller read it (a page keys its cache by it), so
    that loading asks the store for the version in use once.

    Trainable models load the version ``dataset`` uses (``store.models.promoted_model``: promoted for it,
    else the newest trained on it) and raise ``NotTrainedError`` with the train command when there
    is none: a model trained on another dataset is used only where it was promoted. When that
    version's checkpoint is missing or refused, the previous loadable one is used and a
    ``qa_core.services.jobs.CheckpointFallbackWarning`` says which (``load_trained`` returns the
    same as data, for a page to show). Baselines are created and, when they learn statistics
    (``capabilities.learns_statistics``), fitted on ``dataset``'s train split.
    """
    if looks_like_path(name):
        return registry.load(Path(name))
    if systems.is_system(name):
        return systems.load(store, name, dataset)
    ranker_class = registry.ranker_class(name)
    if ranker_class.capabilities.trainable:
        from qa_core.services.jobs import CheckpointFallbackWarning

        if dataset is None:
            raise InputError(f"model {name!r} is trained per dataset: say which dataset it is to score")
        loaded = load_trained(store, name, dataset, version)
        if loaded.notice is not None:
            warnings.warn(loaded.notice, CheckpointFallbackWarning, stacklevel=2)
        return loaded.ranker
    ranker = ranker_class()
    if dataset is not None and ranker_class.capabilities.learns_statistics:
        questions = store.datasets.load_dataset(dataset)
        # Baselines learn label-free statistics (IDF); a dataset without a train split still has text.
        ranker.fit(questions.split("train") or questions.questions, questions.split("dev"), progress=False)
    return ranker


def load_trained(store: Store, name: str, dataset: str, version: VersionInUse | None = None) -> LoadedModel:
    """The version of trainable ``name`` that ``dataset`` uses, loaded (``jobs.load_promoted``: an
    earlier loadable version when its checkpoint is missing or refused, said in ``notice``); the
    store is asked for it once, or not at all when the caller read it (``version``).
    ``NotTrainedError`` with the train command when ``dataset`` has no version of it."""
    from qa_core.services.jobs import load_promoted

    record = store.models.promoted_model(name, dataset) if version is None else version.record
    if record is None:
        raise NotTrainedError(
            f"model {name!r} has no version trained on or promoted for {dataset!r}; train it with: "
            f"{train_command(name, dataset)} (or promote a version trained elsewhere on the Train page)"
        )
    return load_promoted(store, name, dataset, wanted=dict(record))


def looks_like_path(name: str) -> bool:
    return name.endswith(".pt") or "/" in name or "\\" in name


def models_overview(store: Store) -> pd.DataFrame:
    """Registered model versions with their training data, where they are in use, headline metrics,
    titled and labelled as the Train page's versions table (``retraining.VERSIONS_NOTE`` says what
    they are: the dev MAP is on the version's own training labels, not gold)."""
    from qa_core.services.retraining import training_labels_text
    from qa_core.services.viz import VERSION_DEV_MAP, VERSION_TEST_MAP

    rows = [
        {
            "model": version["name"],
            "version": version["version"],
            "trained on": (version["training_data"] or {}).get("dataset", ""),
            "labels": training_labels_text(version["training_data"] or {}),
            "in use for": ", ".join(version["promoted_for"]),
            VERSION_DEV_MAP: (version["metrics"] or {}).get("dev_map"),
            VERSION_TEST_MAP: (version["metrics"] or {}).get("test_gold_map"),
            "created": version["created_at"],
        }
        for version in store.models.model_versions()
    ]
    columns = ["model", "version", "trained on", "labels", "in use for", VERSION_DEV_MAP, VERSION_TEST_MAP, "created"]
    return pd.DataFrame(rows, columns=columns)

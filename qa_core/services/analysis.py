"""Question analysis for the app: the store's trained class CNN and focus tagger, else the rules.

A model that reads question analysis is trained with the analyzer of the store it trains on (passed
in, never looked up from a default store) and keeps it in its checkpoint; pages use this one only to
describe a question for a model that reads none, and for the Errors page's class slices.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from qa_core.checkpoints import Registration
from qa_core.classifiers.analysis import QuestionAnalyzer
from qa_core.classifiers.focus import FocusTagger
from qa_core.classifiers.question_class import QuestionClassifier
from qa_core.rankers import registry
from qa_core.types import InputError

if TYPE_CHECKING:
    from db.store import Store

log = logging.getLogger(__name__)


def question_analyzer(store: Store) -> QuestionAnalyzer:
    """The store's registered question classifiers, else the wh-word rules: what a model that reads
    question analysis is trained with (never raises on a bad checkpoint or an unreadable store:
    question analysis is an aid)."""
    return QuestionAnalyzer(*(_registered_classifier(store, kind) for kind in _classifier_kinds()))


def _classifier_kinds() -> tuple[type[QuestionClassifier], type[FocusTagger]]:
    return QuestionClassifier, FocusTagger


def _registered_classifier(
    store: Store, model: type[QuestionClassifier] | type[FocusTagger]
) -> QuestionClassifier | FocusTagger | None:
    from sqlalchemy.exc import SQLAlchemyError

    try:
        record = store.models.promoted_model(model.kind)
        return None if record is None else model.load(record["checkpoint_path"], Registration.of(record))
    except (InputError, SQLAlchemyError) as error:
        log.warning("registered %s unusable, using the wh-word rules: %s", model.kind, error)
        return None


def classifier_version_key(store: Store) -> tuple[str | None, ...]:
    """Changes when a new question classifier or focus tagger is registered: a cache key."""
    records = (store.models.promoted_model(model.kind) for model in _classifier_kinds())
    return tuple(None if record is None else str(record["checkpoint_path"]) for record in records)


def analyzer_for(store: Store, model: str, settings: Mapping[str, Any] | None = None) -> QuestionAnalyzer | None:
    """The analyzer to train ``model`` with: the store's, when the model reads question analysis.
    ``settings``: the model's config changes, when they decide what it reads (a fusion's members)."""
    reads = registry.create(model, **(settings or {})).capabilities.reads
    return question_analyzer(store) if "question_analysis" in reads else None

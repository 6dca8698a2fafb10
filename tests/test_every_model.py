"""Every registered model through the app's paths, parametrised over the registry (a new model file
is covered without touching this one): the checks of ``tests/ranker_contract.py``, which a plugin's
ranker passes too (``tests/test_ranker_plugin.py``)."""

from __future__ import annotations

import pytest

from qa_core.rankers import registry
from tests.ranker_contract import (
    check_explanations_of_scored_input,
    check_trained_as_job,
    check_untrained_and_settings,
    train_as_jobs,
)


@pytest.fixture(scope="module")
def trained_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store with part of the demo corpus and every trainable model trained as a job and promoted."""
    folder = tmp_path_factory.mktemp("every_model")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RERANK_LAB_DATA", str(folder / "data"))
        patch.setenv("RERANK_LAB_DB", f"sqlite:///{folder / 'store.sqlite'}")
        yield train_as_jobs(folder, registry.trainable())


@pytest.mark.parametrize("model", registry.trainable())
def test_trains_as_a_job_with_typed_progress_and_is_promoted(trained_store: str, model: str) -> None:
    check_trained_as_job(trained_store, model)


@pytest.mark.parametrize("model", registry.trainable())
def test_untrained_refuses_to_score_and_settings_are_counts(model: str) -> None:
    check_untrained_and_settings(model)


@pytest.mark.parametrize("model", registry.available())
def test_explanations_and_edits_are_of_the_input_that_was_scored(trained_store: str, model: str) -> None:
    check_explanations_of_scored_input(trained_store, model)

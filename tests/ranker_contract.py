"""The contract every registered ranker honours, as checks that take a model's name: run over the
whole registry by ``tests/test_every_model.py`` and over a plugin's ranker by
``tests/test_ranker_plugin.py`` (a ranker of another package must pass the same checks).

- a trainable model trains as a job of the store's queue, served by a ``python -m qa_core worker``
  process (the Train page's worker path): typed progress events (``total`` and ``dev_map``), a
  registered and promoted version;
- on a real BM25 pool with first-stage ranks, an explanation is of the very input that was scored
  (``explain(...).score`` equals the ranked table's score) and a counterfactual edit scores exactly
  what the model scores for the edited pool;
- an untrained trainable model refuses to score with ``NotTrainedError``, and its training settings
  are integers >= 1 (the Train page's number inputs).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import pytest

from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.rankers import registry
from qa_core.services import candidate_pools, jobs, model_loading
from qa_core.services.ranking import rank_pool
from qa_core.types import Dataset, NotTrainedError
from tests import ROOT

QUESTION = "who discovered penicillin"
EDIT = "Alexander Fleming discovered penicillin in 1928."
TOLERANCE = 1e-6
QUESTIONS_PER_SPLIT = {"train": 30, "dev": 10, "test": 10}


def small_demo() -> Dataset:
    """The demo's first questions of each split: what is under test is the job path and the request
    path, not what the models learn (eight trainings side by side on the whole demo took 100 s)."""
    demo = load_demo()
    questions = [q for split, count in QUESTIONS_PER_SPLIT.items() for q in demo.split(split)[:count]]
    return Dataset(demo.name, questions, demo.source)


def fast_settings(model: str) -> dict[str, int]:
    """Every training setting the model declares at its smallest (e.g. one epoch)."""
    return dict.fromkeys(registry.ranker_class(model).capabilities.training_settings, 1)


def train_as_jobs(folder: Path, models: Iterable[str]) -> str:
    """The URL of a new store in ``folder`` with part of the demo corpus and each of ``models``
    trained as a queued job and promoted. One worker process serves the jobs one after another:
    one interpreter start and one GloVe load for all of them (eight job processes side by side
    cost 55 s under load). Call it with ``RERANK_LAB_DATA`` and ``RERANK_LAB_DB`` set to the
    folder's data folder and the URL."""
    url = f"sqlite:///{folder / 'store.sqlite'}"
    store = Store(url)
    store.datasets.import_dataset(small_demo())
    started = {
        model: jobs.start_training_job(store, model, "demo", store_labels=False, gold=True,
                                       model_config=fast_settings(model), promote=True, runner="worker")
        for model in models
    }
    worker = subprocess.run([sys.executable, "-m", "qa_core", "worker", "--until-idle"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert worker.returncode == 0, worker.stderr
    for model, job_id in started.items():
        job = store.jobs.job(job_id)
        assert job["status"] == "succeeded", f"{model}: {job['error']}"
    store.close()
    return url


def check_trained_as_job(url: str, model: str) -> None:
    store = Store(url)
    job = store.jobs.jobs(model)[0]
    events = [recorded.event for recorded in store.jobs.job_events(job["id"])]
    assert events and all(event.total for event in events), "every event says how far along it is"
    assert events[-1].dev_map is not None and 0.0 <= events[-1].dev_map <= 1.0
    promoted = store.models.promoted_model(model, "demo")
    assert promoted is not None and promoted["id"] == job["model_version_id"]
    store.close()


def check_explanations_of_scored_input(url: str, model: str) -> None:
    store = Store(url)
    ranker = model_loading.load_ranker(store, model, "demo")
    pool = candidate_pools.candidates_for_question(store, "demo", QUESTION, k=12)
    assert all(c.first_stage_rank is not None for c in pool)  # what the attention LSTM reads
    result = rank_pool(ranker, QUESTION, pool, model=model)
    table = result.table()
    assert list(table["doc_id"]) == [s.candidate.doc_id for s in result.scored]  # the table is a view
    for scored in result.scored:
        explanation = result.explain(scored.rank)
        assert explanation.score == pytest.approx(scored.score, abs=TOLERANCE), f"rank {scored.rank}"
        assert len(explanation.answer_weights) == len(explanation.answer_tokens)
    second = result.at(2)
    edited = result.counterfactual(2, EDIT)
    pool_after = list(pool)
    pool_after[second.index] = replace(second.candidate, text=EDIT)  # same doc_id, rank and URL
    assert edited.score == pytest.approx(ranker.score(QUESTION, pool_after)[second.index], abs=TOLERANCE)
    assert edited.explanation.score == pytest.approx(edited.score, abs=TOLERANCE)
    assert edited.original_score == second.score
    store.close()


def check_untrained_and_settings(model: str) -> None:
    """Untrained, a trainable model refuses to score (never scores with its initial weights); its
    training settings are integers >= 1 by default, what the Train page's inputs take."""
    ranker = registry.create(model)
    with pytest.raises(NotTrainedError):
        ranker.score(QUESTION, ["Fleming discovered penicillin.", "Penicillin is an antibiotic."])
    for name in ranker.capabilities.training_settings:
        value = getattr(ranker.config, name)
        assert type(value) is int and value >= 1, f"{model}.{name} = {value!r}"

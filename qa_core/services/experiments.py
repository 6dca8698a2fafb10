"""Train, register and evaluate rankers: the one code path for the CLI, the pages and benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa_core import config
from qa_core.checkpoints import file_sha256, new_checkpoint_path
from qa_core.classifiers.analysis import QuestionAnalyzer
from qa_core.evaluation import EvalResult, evaluate, qrels_from_questions, run_from_scores
from qa_core.rankers import registry
from qa_core.rankers.base import Ranker, config_dict
from qa_core.training import reproducibility
from qa_core.training.events import ProgressCallback
from qa_core.types import Dataset, InputError, Question

SCORING_BLOCK = 32  # questions per score_pools call when progress is reported

ScoringProgress = Callable[[int, int], None]  # (questions scored, questions in all)


def score_questions(
    ranker: Ranker, questions: Sequence[Question], progress: ScoringProgress | None = None
) -> dict[str, dict[str, float]]:
    """Score every question's pool; returns a run ``{qid: {doc_id: score}}``.

    With ``progress``, the pools are scored in blocks of whole questions and ``progress`` is called
    after each block (a pool's scores never depend on another pool, so the run is the same).
    """
    pools = [(q.text, q.candidates) for q in questions]
    if progress is None:
        return run_from_scores(questions, ranker.score_pools(pools))
    scores = []
    progress(0, len(pools))
    for start in range(0, len(pools), SCORING_BLOCK):
        scores.extend(ranker.score_pools(pools[start:start + SCORING_BLOCK]))
        progress(len(scores), len(pools))
    return run_from_scores(questions, scores)


def evaluate_ranker(ranker: Ranker, questions: Sequence[Question], clean: bool = False) -> EvalResult:
    """Score the pools and compute MAP/MRR/P@1/nDCG@10 against the questions' gold labels."""
    return score_and_evaluate(ranker, questions, clean=clean)[1]


def score_and_evaluate(
    ranker: Ranker, questions: Sequence[Question], clean: bool = False, progress: ScoringProgress | None = None
) -> tuple[dict[str, dict[str, float]], EvalResult]:
    """The run over the labelled questions and its metrics (one scoring pass for both)."""
    labelled = [q for q in questions if any(c.label is not None for c in q.candidates)]
    if not labelled:
        raise InputError("no gold labels in this split: nothing to evaluate against")
    if not has_positives(labelled):
        # Every measure would be 0 for every model: a number that looks like a result but is none.
        raise InputError(
            "no relevant (label > 0) candidate in this split: MAP, MRR, P@1 and nDCG are undefined; "
            "label some candidates relevant first"
        )
    run = score_questions(ranker, labelled, progress)
    return run, evaluate(run, qrels_from_questions(labelled), clean=clean)


def has_positives(questions: Sequence[Question]) -> bool:
    """Whether any candidate is labelled relevant (grade > 0)."""
    return any((c.label or 0) > 0 for q in questions for c in q.candidates)


def require_split(dataset: Dataset, split: str) -> list[Question]:
    questions = dataset.split(split)
    if not questions:
        known = ", ".join(dataset.splits) or "none"
        raise InputError(f"dataset {dataset.name!r} has no {split!r} split (splits: {known})")
    return questions


@dataclass
class TrainingOutcome:
    ranker: Ranker
    checkpoint: Path
    report: dict[str, Any]
    metrics: dict[str, Any]
    provenance: dict[str, Any]  # reproducibility.provenance and the checkpoint's SHA-256


def train_ranker(
    model: str,
    dataset: Dataset,
    *,
    seed: int = 1,
    train_split: str = "train",
    dev_split: str = "dev",
    progress: bool = True,
    callback: ProgressCallback | None = None,
    checkpoint: Path | None = None,
    model_config: dict[str, Any] | None = None,
    analyzer: QuestionAnalyzer | None = None,
    threads: int | None = None,
) -> TrainingOutcome:
    """Fit ``model`` on a dataset's train split, select on dev, save the checkpoint atomically.

    ``model_config`` overrides the model's settings (e.g. ``{"max_epochs": 1}``); an unknown setting is
    an ``InputError``. ``analyzer``: the question analysis for a model that reads one (the caller's
    store's classifiers, ``analysis.question_analyzer``); the rules when ``None``. ``threads``: the
    CPU threads (``reproducibility.training_threads()`` when ``None``); training and the DEV
    evaluation run with them and torch's deterministic algorithms, so the same seed, data,
    settings and threads give the same checkpoint bytes (``TrainingOutcome.provenance``).
    """
    ranker = registry.create(model, **(model_config or {}))
    if not ranker.capabilities.trainable:
        raise InputError(f"model {model!r} has nothing to train; evaluate it directly")
    train, dev = require_split(dataset, train_split), require_split(dataset, dev_split)
    for split, questions in ((train_split, train), (dev_split, dev)):
        if not has_positives(questions):
            # Without one, training "succeeds" with dev MAP 0 and the useless model gets promoted.
            raise InputError(
                f"split {split!r} of dataset {dataset.name!r} has no relevant (label > 0) candidate: "
                "a model cannot learn or be selected without one; label some candidates relevant first"
            )
    path = checkpoint or new_checkpoint_path(model, dataset.name, f"seed{seed}")
    config.ensure_free_space(path.parent, f"training {model}")
    callback = config.watch_free_space(path.parent, f"training {model}", callback)
    threads = threads or reproducibility.training_threads()
    started = time.perf_counter()
    with reproducibility.deterministic(threads):
        report = ranker.fit(train, dev, seed=seed, analyzer=analyzer, progress=progress, callback=callback)
        report["seconds"] = round(time.perf_counter() - started, 2)
        dev_result = evaluate_ranker(ranker, dev)
    metrics = {f"dev_{name}": value for name, value in dev_result.aggregate.items()}
    registry.save(ranker, path)
    record = reproducibility.provenance(seed=seed, threads=threads, settings=config_dict(ranker.config),
                                        device=str(ranker.device), train=train, dev=dev)
    # The file as trained: registration stamps its version id in, and the store keeps that file's own hash.
    record["checkpoint_sha256"] = file_sha256(path)
    return TrainingOutcome(ranker, path, report, metrics, record)


EVAL_SPLIT = "test"  # also reported on gold labels when the dataset has them, so versions compare


def version_record(
    outcome: TrainingOutcome,
    dataset: Dataset,
    gold_eval: Sequence[Question],
    *,
    seed: int,
    train_split: str,
    dev_split: str,
    extra: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(training_data, metrics)`` of a new version, the same whichever path trained it (the CLI,
    a job): the data it saw, its DEV metrics and, when ``gold_eval`` (the dataset's
    ``EVAL_SPLIT`` with its gold labels) has any relevant candidate and is not a training or
    selection split, its gold TEST metrics, so every version lists the same numbers."""
    metrics: dict[str, Any] = {**outcome.metrics, "train_seconds": outcome.report.get("seconds")}
    if has_positives(gold_eval) and EVAL_SPLIT not in (train_split, dev_split):  # all-negative gold has no MAP
        with reproducibility.deterministic(outcome.provenance["threads"]):  # as DEV was scored
            result = evaluate_ranker(outcome.ranker, gold_eval)
        metrics.update({f"{EVAL_SPLIT}_gold_{metric}": value for metric, value in result.aggregate.items()})
    training_data = {
        "dataset": dataset.name,
        "train": train_split,
        "dev": dev_split,
        "seed": seed,
        # TRAIN pairs with a label, whatever their source: the x axis of the Train page's curve.
        "train_labels": sum(c.label is not None for q in dataset.split(train_split) for c in q.candidates),
        "epochs_run": outcome.report.get("epochs_run"),
        "best_epoch": outcome.report.get("best_epoch"),
        "reproducibility": outcome.provenance,  # what ``python -m qa_core reproduce`` trains it again from
        **(extra or {}),
    }
    return training_data, metrics

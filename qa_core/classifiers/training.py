"""Train the question classifiers from their label files: the one code path of the CLI
(``python -m qa_core train-classifier``) and ``benchmarks/classifiers.py``.

Selection data is always carved out of the training file (a seeded held-out fraction: 5% for the
class CNN as in the thesis, 10% for the smaller focus file); a test file is only ever scored.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any, TypeVar

from qa_core.classifiers.focus import FocusConfig, FocusTagger
from qa_core.classifiers.question_class import QuestionClassConfig, QuestionClassifier
from qa_core.data.questions import FocusQuestion, load_focus_questions, load_question_classes
from qa_core.types import InputError

T = TypeVar("T")

CLASS_TRAIN_FILE = "train_5500.label"
CLASS_TEST_FILE = "TREC_10.label"
FOCUS_FILE = "train_1228.label"
CLASS_DEV_FRACTION = 0.05
FOCUS_DEV_FRACTION = 0.1


def split_off(items: Sequence[T], fraction: float, seed: int) -> tuple[list[T], list[T]]:
    """Seeded shuffle, then (rest, held-out ``fraction``)."""
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    cut = round(len(shuffled) * fraction)
    return shuffled[cut:], shuffled[:cut]


@dataclass
class ClassifierOutcome:
    model: QuestionClassifier | FocusTagger
    report: dict[str, Any]  # the training loop's report
    metrics: dict[str, float]  # dev accuracy, and test accuracy where a test file exists


def _file(folder: Path, name: str) -> Path:
    path = Path(folder) / name
    if not path.is_file():
        raise InputError(f"{name} not found in {folder}")
    return path


def _fit_held_out(
    model: QuestionClassifier | FocusTagger, items: Sequence[T], fraction: float, inputs: str, target: str, seed: int,
    progress: bool,
) -> tuple[list[T], list[T], dict[str, Any]]:
    """``model`` fitted on ``items`` minus a seeded held-out ``fraction`` that selects its state; each
    item's ``inputs`` attribute is what the model reads, ``target`` what it predicts. Returns the
    train and held-out items and the training loop's report."""
    train, dev = split_off(items, fraction, seed)
    read, gold = attrgetter(inputs), attrgetter(target)
    report = model.fit([read(i) for i in train], [gold(i) for i in train], [read(i) for i in dev], [gold(i) for i in dev],
                       seed=seed, progress=progress)  # fmt: skip
    return train, dev, report


def train_question_classifier(
    folder: str | Path, *, seed: int = 1, config: QuestionClassConfig | None = None, progress: bool = False
) -> ClassifierOutcome:
    """Class CNN on ``folder/train_5500.label`` (5% held out for selection); accuracy on
    ``folder/TREC_10.label`` when present."""
    folder = Path(folder)
    classifier = QuestionClassifier(config)
    train_all = load_question_classes(_file(folder, CLASS_TRAIN_FILE))
    train, dev, report = _fit_held_out(classifier, train_all, CLASS_DEV_FRACTION, "text", "coarse", seed, progress)
    metrics = {"dev_accuracy": report["best_dev_map"], "train_questions": len(train), "dev_questions": len(dev)}
    if (folder / CLASS_TEST_FILE).is_file():
        test = load_question_classes(folder / CLASS_TEST_FILE)
        predicted = classifier.predict([q.text for q in test])
        metrics["test_accuracy"] = sum(p == q.coarse for p, q in zip(predicted, test, strict=True)) / len(test)
    return ClassifierOutcome(classifier, report, metrics)


def focus_accuracy(tagger: FocusTagger, questions: Sequence[FocusQuestion]) -> dict[str, float]:
    """``accuracy``: the predicted token is the focus head the tagger is trained on;
    ``accuracy_any_marked``: it is any marked token of a multi-word focus ("Nobel Peace Prize");
    ``accuracy_single_word`` (over ``single_word`` questions): accuracy on the questions whose
    focus is one word, the kind the thesis kept (it dropped multi-word and multi-focus ones)."""
    predicted = tagger.predict([q.tokens for q in questions])
    pairs = list(zip(predicted, questions, strict=True))
    single = [(p, q) for p, q in pairs if len(q.marked) == 1]
    return {
        "accuracy": sum(p == q.focus for p, q in pairs) / len(pairs),
        "accuracy_any_marked": sum(p in q.marked for p, q in pairs) / len(pairs),
        "accuracy_single_word": sum(p == q.focus for p, q in single) / len(single) if single else float("nan"),
        "single_word": len(single),
    }


def fit_focus_tagger(
    questions: Sequence[FocusQuestion], *, seed: int, config: FocusConfig | None = None, progress: bool = False
) -> tuple[FocusTagger, dict[str, Any]]:
    """A tagger trained on ``questions`` minus a seeded 10% held out for selection."""
    tagger = FocusTagger(config)
    _, _, report = _fit_held_out(tagger, questions, FOCUS_DEV_FRACTION, "tokens", "focus", seed, progress)
    return tagger, report


def train_focus_tagger(
    folder: str | Path, *, seed: int = 1, config: FocusConfig | None = None, progress: bool = False
) -> ClassifierOutcome:
    """Focus tagger on ``folder/train_1228.label`` (10% held out for selection)."""
    questions = load_focus_questions(_file(folder, FOCUS_FILE))
    tagger, report = fit_focus_tagger(questions, seed=seed, config=config, progress=progress)
    metrics = {"dev_accuracy": report["best_dev_map"], "questions": len(questions)}
    return ClassifierOutcome(tagger, report, metrics)

"""Question-class CNN (train_5500 minus a seeded 10% dev split, test TREC_10, over seeds) and focus
tagger (k-fold cross-validation on train_1228; 10% of each training part is its dev split).
Writes benchmarks/results/classifiers.json.

    .venv/bin/python benchmarks/classifiers.py --seeds 1 2 3 --folds 10
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from typing import TypeVar

from common import machine, mean_std, write_result

from qa_core import config
from qa_core.classifiers.focus import FocusTagger
from qa_core.classifiers.question_class import QuestionClassifier
from qa_core.data.questions import FocusQuestion, load_focus_questions, load_question_classes

T = TypeVar("T")


def split_off(items: Sequence[T], fraction: float, seed: int) -> tuple[list[T], list[T]]:
    """Seeded shuffle, then (rest, held-out ``fraction``)."""
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    cut = round(len(shuffled) * fraction)
    return shuffled[cut:], shuffled[:cut]


def question_class_runs(root, seeds: list[int]) -> dict:
    train_all = load_question_classes(root / "question_class" / "train_5500.label")
    test = load_question_classes(root / "question_class" / "TREC_10.label")
    runs = []
    for seed in seeds:
        train, dev = split_off(train_all, 0.1, seed)
        classifier = QuestionClassifier()
        report = classifier.fit(
            [q.text for q in train], [q.coarse for q in train],
            [q.text for q in dev], [q.coarse for q in dev], seed=seed,
        )
        predicted = classifier.predict([q.text for q in test])
        accuracy = sum(p == q.coarse for p, q in zip(predicted, test, strict=True)) / len(test)
        runs.append({"seed": seed, "test_accuracy": accuracy, "dev_accuracy": report["best_dev_map"],
                     "best_epoch": report["best_epoch"], "train_seconds": report["seconds"]})
        print("class", runs[-1], flush=True)
    return {
        "train": len(train_all), "test": len(test), "config": vars(QuestionClassifier().config), "runs": runs,
        "test_accuracy": mean_std([r["test_accuracy"] for r in runs]),
        "train_seconds": mean_std([r["train_seconds"] for r in runs]),
    }


def focus_cross_validation(root, folds: int, seed: int) -> dict:
    questions: list[FocusQuestion] = load_focus_questions(root / "question_focus" / "train_1228.label")
    random.Random(seed).shuffle(questions)
    runs = []
    for fold in range(folds):
        test = questions[fold::folds]
        train, dev = split_off([q for i, q in enumerate(questions) if i % folds != fold], 0.1, seed + fold)
        tagger = FocusTagger()
        report = tagger.fit([q.tokens for q in train], [q.focus for q in train],
                            [q.tokens for q in dev], [q.focus for q in dev], seed=seed + fold)
        predicted = tagger.predict([q.tokens for q in test])
        runs.append({
            "fold": fold, "questions": len(test),
            "accuracy": sum(p == q.focus for p, q in zip(predicted, test, strict=True)) / len(test),
            "accuracy_any_marked": sum(p in q.marked for p, q in zip(predicted, test, strict=True)) / len(test),
            "best_epoch": report["best_epoch"], "train_seconds": report["seconds"],
        })
        print("focus", runs[-1], flush=True)
    total = len(questions)
    return {
        "questions": total, "folds": folds, "seed": seed, "config": vars(FocusTagger().config), "runs": runs,
        # Pooled over folds: every question is predicted exactly once.
        "accuracy": sum(r["accuracy"] * r["questions"] for r in runs) / total,
        "accuracy_any_marked": sum(r["accuracy_any_marked"] * r["questions"] for r in runs) / total,
        "train_seconds_per_fold": mean_std([r["train_seconds"] for r in runs]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--folds", type=int, default=10)
    args = parser.parse_args()
    root = config.shared_data_dir()
    if root is None:
        sys.exit("benchmarks need the shared data folder (../shared/data or RERANK_LAB_SHARED_DATA)")
    started = time.perf_counter()
    results = {
        "machine": machine(),
        "question_class": question_class_runs(root, args.seeds),
        "focus": focus_cross_validation(root, args.folds, seed=args.seeds[0]),
    }
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    print(write_result("classifiers", results))


if __name__ == "__main__":
    main()

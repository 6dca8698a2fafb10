"""Question-class CNN (train_5500 minus a seeded 5% dev split, test TREC_10, over seeds) and focus
tagger (k-fold cross-validation on train_1228; 10% of each training part is its dev split), both
through ``qa_core.classifiers.training`` (the CLI's code path). Writes
benchmarks/results/classifiers.json and the "classifiers" section of docs/benchmarks.md.

    .venv/bin/python benchmarks/classifiers.py --seeds 1 2 3 --folds 10
    .venv/bin/python benchmarks/classifiers.py --parts focus   # rerun one part, keep the other's results
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import asdict

import numpy as np
from common import RESULTS, machine, machine_line, mean_std, write_result, write_section

from qa_core import config
from qa_core.classifiers.focus import FocusConfig
from qa_core.classifiers.question_class import QuestionClassConfig
from qa_core.classifiers.training import fit_focus_tagger, focus_accuracy, train_question_classifier
from qa_core.data.questions import load_focus_questions

PARTS = ("question_class", "focus", "inputs")
THESIS_CLASS_ACCURACY = 0.912  # Nicosia 2018, Table 6.6 (best model picked on the test set)
KIM_STATIC_ACCURACY = 0.928  # Kim 2014, CNN-static (word2vec 300d)
THESIS_FOCUS_ACCURACY = 0.923  # Nicosia 2018, Table 6.7, cross-validated
# Words-only input (syntax_dim=0), benchmarks/classifiers.py on 2026-11-23 (git 4d1ef1d): seeds 1-3 on TREC_10,
WORDS_ONLY_CLASS_ACCURACY = (0.903, 0.009)
# and the same 10 focus folds (syntax_dim=0), benchmarks/classifiers.py on 2026-11-23 (git 4d1ef1d).
WORDS_ONLY_FOCUS_ACCURACY = 0.791


def question_class_runs(root, seeds: list[int]) -> dict:
    runs = []
    for seed in seeds:
        outcome = train_question_classifier(root / "question_class", seed=seed)
        runs.append({"seed": seed, "test_accuracy": outcome.metrics["test_accuracy"],
                     "dev_accuracy": outcome.metrics["dev_accuracy"], "best_epoch": outcome.report["best_epoch"],
                     "epochs_run": outcome.report["epochs_run"], "train_seconds": outcome.report["seconds"]})
        print("class", runs[-1], flush=True)
    return {
        "train": outcome.metrics["train_questions"] + outcome.metrics["dev_questions"], "test": 500,
        "config": asdict(QuestionClassConfig()), "runs": runs,
        "test_accuracy": mean_std([r["test_accuracy"] for r in runs]),
        "dev_accuracy": mean_std([r["dev_accuracy"] for r in runs]),
        "train_seconds": mean_std([r["train_seconds"] for r in runs]),
    }


def focus_cross_validation(root, folds: int, seed: int) -> dict:
    questions = load_focus_questions(root / "question_focus" / "train_1228.label")
    random.Random(seed).shuffle(questions)
    runs = []
    for fold in range(folds):
        test = questions[fold::folds]
        tagger, report = fit_focus_tagger([q for i, q in enumerate(questions) if i % folds != fold], seed=seed + fold)
        runs.append({"fold": fold, "questions": len(test), **focus_accuracy(tagger, test),
                     "best_epoch": report["best_epoch"], "epochs_run": report["epochs_run"],
                     "train_seconds": report["seconds"]})
        print("focus", runs[-1], flush=True)
    total = len(questions)
    return {
        "questions": total, "folds": folds, "seed": seed, "config": asdict(FocusConfig()), "runs": runs,
        # Pooled over folds: every question is predicted exactly once.
        "accuracy": sum(r["accuracy"] * r["questions"] for r in runs) / total,
        "accuracy_any_marked": sum(r["accuracy_any_marked"] * r["questions"] for r in runs) / total,
        "single_word": sum(r["single_word"] for r in runs),
        "accuracy_single_word": sum(r["accuracy_single_word"] * r["single_word"] for r in runs)
        / sum(r["single_word"] for r in runs),
        "train_seconds_per_fold": mean_std([r["train_seconds"] for r in runs]),
    }


def _correct(predicted: list, gold: list) -> str:
    """Per-question correctness as a compact string of 0s and 1s (kept in the result file)."""
    return "".join("1" if p == g else "0" for p, g in zip(predicted, gold, strict=True))


def input_ablation(root, seeds: list[int], folds: int) -> dict:
    """Per-question correctness with the POS-tag and dependency-label inputs (the defaults) and
    without them (``syntax_dim=0``, the thesis's words-only input): the class CNN on TREC_10 and on its
    held-out split for every seed, the focus tagger over the same cross-validation folds as
    ``focus_cross_validation``. The earlier runs behind the 'words only' rows kept only accuracies;
    these keep every question's outcome, for the paired significance tests."""
    from qa_core.classifiers.training import CLASS_DEV_FRACTION, split_off
    from qa_core.data.questions import load_question_classes

    train_all = load_question_classes(root / "question_class" / "train_5500.label")
    test = load_question_classes(root / "question_class" / "TREC_10.label")
    variants = {"syntax": {}, "words_only": {"syntax_dim": 0}}
    result: dict = {"question_class": {}, "focus": {}}
    for variant, change in variants.items():
        runs = []
        for seed in seeds:
            outcome = train_question_classifier(root / "question_class", seed=seed,
                                                config=QuestionClassConfig(**change))
            _, dev = split_off(train_all, CLASS_DEV_FRACTION, seed)
            runs.append({"seed": seed, "test": _correct(outcome.model.predict([q.text for q in test]),
                                                        [q.coarse for q in test]),
                         "dev": _correct(outcome.model.predict([q.text for q in dev]), [q.coarse for q in dev])})
            print("inputs class", variant, seed, runs[-1]["test"].count("1") / len(test), flush=True)
        result["question_class"][variant] = runs
        questions = load_focus_questions(root / "question_focus" / "train_1228.label")
        random.Random(seeds[0]).shuffle(questions)
        outcomes = [""] * len(questions)
        for fold in range(folds):
            tagger, _ = fit_focus_tagger([q for i, q in enumerate(questions) if i % folds != fold],
                                         seed=seeds[0] + fold, config=FocusConfig(**change))
            held_out = questions[fold::folds]
            for index, correct in zip(range(fold, len(questions), folds),
                                      _correct(tagger.predict([q.tokens for q in held_out]), [q.focus for q in held_out])):
                outcomes[index] = correct
        result["focus"][variant] = "".join(outcomes)
        print("inputs focus", variant, result["focus"][variant].count("1") / len(questions), flush=True)
    return result


def accuracy_test(with_syntax: list[str], words_only: list[str]) -> dict:
    """Per-question correctness (one string per seed) averaged over seeds, with against without the
    syntax inputs: accuracies, paired randomisation p-value and MDD (``qa_core.significance``)."""
    from qa_core.significance import minimum_detectable_difference, randomisation_test

    a, b = (np.mean([[int(c) for c in run] for run in runs], axis=0) for runs in (with_syntax, words_only))
    return {"with": float(a.mean()), "without": float(b.mean()), "delta": float((a - b).mean()),
            "questions": len(a), "p": randomisation_test(a, b).p_value, "mdd": minimum_detectable_difference(a - b)}


def inputs_line(results: dict) -> str:
    """The input claims with their p-values, from ``input_ablation``'s reruns (and how closely those
    reruns reproduce the rows above: training on CPU threads is not bit-reproducible)."""
    inputs = results["inputs"]
    from qa_core.significance import ALPHA, format_p

    def words(test: dict) -> str:
        verdict = "significant" if test["p"] < ALPHA else "not significant"
        below = "; below the MDD" if abs(test["delta"]) < test["mdd"] else ""
        p = format_p(test["p"])
        return (f"{test['with']:.3f} against {test['without']:.3f} words only, {100 * test['delta']:+.1f} points "
                f"({'p ' + p if p.startswith('<') else 'p = ' + p}, MDD {100 * test['mdd']:.1f} points over "
                f"{test['questions']} questions: {verdict}{below})")

    runs = inputs["question_class"]
    seeds = [run["seed"] for run in runs["syntax"]]
    test = accuracy_test([r["test"] for r in runs["syntax"]], [r["test"] for r in runs["words_only"]])
    held_out = accuracy_test([runs["syntax"][0]["dev"]], [runs["words_only"][0]["dev"]])
    focus = accuracy_test([inputs["focus"]["syntax"]], [inputs["focus"]["words_only"]])
    return ("Inputs tested (POS-tag and dependency-label embeddings against words only; paired randomisation test "
            "over questions on per-question correctness averaged over seeds, 10,000 seeded sign flips; reruns of "
            "both inputs that keep every question's outcome, `--parts inputs`, since the runs behind the rows above "
            f"kept only accuracies): class CNN on TREC_10, seeds {', '.join(map(str, seeds))}: {words(test)}; on the "
            f"held-out split with seed {seeds[0]}, where the rule adopted them: {words(held_out)}; focus tagger, the "
            f"same {len(inputs['focus']['syntax'])} questions in 10-fold cross-validation: {words(focus)}. The reruns "
            f"reproduce the rows above to within training noise (TREC_10 with syntax {test['with']:.3f} against "
            f"{results['question_class']['test_accuracy'][0]:.3f}, words only {test['without']:.3f} against "
            f"{WORDS_ONLY_CLASS_ACCURACY[0]:.3f}; focus {focus['with']:.3f} and {focus['without']:.3f} against "
            f"{results['focus']['accuracy']:.3f} and {WORDS_ONLY_FOCUS_ACCURACY:.3f}).")


def render_section(results: dict) -> list[str]:
    qc, focus = results["question_class"], results["focus"]
    mean, std = qc["test_accuracy"]
    dev_mean, dev_std = qc["dev_accuracy"]
    return [
        "## Question classifiers",
        "",
        "Script: `benchmarks/classifiers.py` (training code: `qa_core/classifiers/training.py`, the CLI's "
        "`train-classifier`). Word vectors: GloVe 6B 50d, tokens lowercased, digits -> 0; trainable in the class "
        "CNN, frozen and open-vocabulary in the focus tagger (a word unseen in training gets its GloVe row at "
        "prediction time). Held-out splits come from the training files only; TREC_10 is only scored.",
        "",
        "| model | data | metric | measured | published |",
        "|---|---|---|---|---|",
        f"| question class CNN (widths 1,2,3 x 300, 100-d ReLU; words + POS tag + dependency label) | UIUC train_5500 (5% held out for selection) -> "
        f"TREC_10 test, {len(qc['runs'])} seeds | test accuracy | {mean:.3f} ± {std:.3f} (dev {dev_mean:.3f} ± "
        f"{dev_std:.3f}) | {THESIS_CLASS_ACCURACY:.3f} (thesis; model picked on the test set), Kim 2014 "
        f"CNN-static {KIM_STATIC_ACCURACY:.3f} (word2vec 300d) |",
        f"| question class CNN, words only (the thesis's input) | same splits, 3 seeds | test accuracy | "
        f"{WORDS_ONLY_CLASS_ACCURACY[0]:.3f} ± {WORDS_ONLY_CLASS_ACCURACY[1]:.3f} (dev 0.893 ± 0.017) | |",
        f"| focus tagger (4 x width-10 convs, 100 maps; words + POS tag + dependency label) | train_1228, "
        f"{focus['folds']}-fold CV (10% of each training part held out for selection) | accuracy (head token) | "
        f"{focus['accuracy']:.3f} | "
        f"{THESIS_FOCUS_ACCURACY:.3f} (thesis, 1,030 single-focus questions) |",
        f"| | | accuracy (any marked token) | {focus['accuracy_any_marked']:.3f} | |",
        f"| | {focus['single_word']} questions with a one-word focus (the kind the thesis kept) | accuracy | "
        f"{focus['accuracy_single_word']:.3f} | {THESIS_FOCUS_ACCURACY:.3f} |",
        f"| focus tagger, words only (the thesis's input) | same folds | accuracy (head token) | "
        f"{WORDS_ONLY_FOCUS_ACCURACY:.3f} | |",
        "",
        "Why the measured accuracies differ from the thesis (chapter 6):",
        "",
        "- Both models used to map every word unseen in training to one UNK vector; a third of the held-out "
        "focus words (rare nouns) and 8% of the TREC_10 tokens are such words. The frozen tables are now "
        "open-vocabulary (GloVe rows appended at prediction time).",
        "- Class CNN: the thesis picked its model on the test set (section 6.4.5: 'using the test set to pick the "
        "best model'); here selection is on 5% of train_5500 only. Its word2vec vectors (Wikipedia + AQUAINT, the "
        "newswire the TREC questions come from) are replaced by GloVe 6B 50d; Kim's 92.8% used 300d word2vec. On the "
        "held-out split the trainable table beat the frozen one (0.876 vs 0.839, seed 1), so it is trainable "
        "here. Tokens also carry POS-tag and dependency-label embeddings, as in the focus tagger: on the held-out "
        "split (seed 1) they raised accuracy from 0.876 to 0.894, past the +1 point fixed beforehand as the rule "
        "to adopt them. TREC_10 has 500 questions: one question is 0.2 points.",
        "- Focus tagger: the thesis trained on 1,030 questions without multi-word or implicit foci; this file "
        "has 1,228 with 339 multi-word foci, scored on their head word (the row 'one-word focus' is the like-for-like "
        "subset). With words alone (the thesis's input) training accuracy reached about 0.98 while cross-validated "
        "accuracy stayed at 0.791: 50d word vectors do not generalise the focus position from about 1,000 "
        "questions. The focus is the head noun asked about, a syntactic fact, so each token also carries "
        "embeddings of its spaCy POS tag and dependency label (a deviation; `syntax_dim=0` restores the "
        "thesis's input). The thesis's 300 epochs at lr 1e-4 are replaced by Adam 1e-3 for at most 40 epochs.",
        "",
        *([inputs_line(results), ""] if "inputs" in results else []),
        f"Training time: class CNN {qc['train_seconds'][0]:.0f} s per seed, focus tagger "
        f"{focus['train_seconds_per_fold'][0]:.0f} s per fold (shared 2-core machine, noisy).",
        f"Machine: {machine_line(results['machine'])}.",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--render", action="store_true", help="only rewrite the markdown from the saved results")
    args = parser.parse_args()
    stored = RESULTS / "classifiers.json"
    if args.render:
        print(write_section("classifiers", render_section(json.loads(stored.read_text()))))
        return
    root = config.shared_data_dir()
    if root is None:
        sys.exit("benchmarks need the shared data folder (../shared/data or RERANK_LAB_SHARED_DATA)")
    results = json.loads(stored.read_text()) if stored.exists() else {}
    results["machine"] = machine()
    if "question_class" in args.parts:
        results["question_class"] = question_class_runs(root, args.seeds)
    if "focus" in args.parts:
        results["focus"] = focus_cross_validation(root, args.folds, seed=args.seeds[0])
    if "inputs" in args.parts:
        results["inputs"] = input_ablation(root, args.seeds, args.folds)
    print(write_result("classifiers", results))
    print(write_section("classifiers", render_section(results)))


if __name__ == "__main__":
    main()

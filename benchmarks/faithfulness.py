"""Faithfulness of every registered model's explainers (``qa_core.explain.explainers``) on WikiQA
and TrecQA (``qa_core.faithfulness``, ERASER-style): comprehensiveness and sufficiency of the top
10/20/50% of answer words by the explanation's weights, against the same deletions of random words
(mean of 5 draws), with a paired randomisation test over pairs. Trainable models are trained on
TRAIN with seed 1 and selected on DEV first (the rankers benchmark's path), once per dataset.

Per model: every explainer it offers is measured on a seeded sample of DEV questions
(``faithfulness_dev.json``); the default explainer is chosen from those DEV results by the rule of
``qa_core.explain.defaults`` (written in docs/benchmarks.md before the run); then only the default
is measured on TEST, once (``faithfulness.json``; the app reads both to say how far to trust a heatmap).
Then the contrastive view's test (why A above B) over a seeded sample of TEST questions where a
wrong answer is ranked above a right one, by the default explainer (``faithfulness_contrastive.json``);
``--contrastive`` measures only that, for models that already have a default.

    .venv/bin/python benchmarks/faithfulness.py                 # every model, both datasets
    .venv/bin/python benchmarks/faithfulness.py --models smcnn --dev-questions 10 --questions 40
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from common import machine, machine_line, read_results, shared_datasets, write_result, write_section

from qa_core.explain import explainers
from qa_core.explain.defaults import defaults, dev_score
from qa_core.faithfulness import RANDOM_DRAWS, faithfulness_table, gap_deletions, summarise, summarise_gaps
from qa_core.rankers import registry
from qa_core.rankers.base import Ranker
from qa_core.services import analysis, contrastive, store_setup
from qa_core.services.experiments import train_ranker
from qa_core.services.ranking import rank_pool
from qa_core.types import Dataset

SEED = 1
CONTRAST_QUESTIONS = 40  # TEST questions sampled for the contrastive test (those where a wrong answer wins)


def ready_ranker(name: str, dataset: Dataset, max_epochs: int | None = None) -> tuple[Ranker, float | None]:
    """The model as the rankers benchmark builds it (seed 1), and its DEV MAP when trained; with
    ``max_epochs``, models that take that setting train at most that many epochs (CPU budget)."""
    capabilities = registry.ranker_class(name).capabilities
    if not capabilities.trainable:
        ranker = registry.create(name)
        if capabilities.learns_statistics:
            ranker.fit(dataset.split("train"), dataset.split("dev"), progress=False)
        return ranker, None
    analyzer = analysis.analyzer_for(store_setup.open_store(), name)
    with tempfile.TemporaryDirectory() as tmp:
        settings = {"max_epochs": max_epochs} if max_epochs and "max_epochs" in capabilities.training_settings else {}
        outcome = train_ranker(
            name, dataset, seed=SEED, progress=False, checkpoint=Path(tmp) / "model.pt", analyzer=analyzer,
            model_config=settings,
        )
    return outcome.ranker, outcome.metrics["dev_map"]


def sampled_questions(dataset: Dataset, split: str, sample: int | None) -> list:
    """The split, or a seeded sample of ``sample`` of its questions (every pair of each): the
    deletions cost 36 scorings per pair, too many for every model on a busy 2-core machine."""
    questions = dataset.split(split)
    if sample is None or sample >= len(questions):
        return questions
    return random.Random(SEED).sample(questions, sample)


def _entry(label: str, ranker: Ranker, explainer: str, questions: list, pairs: int, started: float,
           summaries: list) -> dict[str, Any]:
    """A stored result: the summaries per k (dataclasses with ``beats_random``) and the verdict."""
    seconds = time.perf_counter() - started
    print(label, ranker.name, explainer, f"{pairs} pairs, {seconds:.0f} s", flush=True)
    return {
        "explainer": explainer,
        "questions": len(questions),
        "pairs": pairs,
        "seconds": round(seconds, 1),
        "summaries": [{**dataclasses.asdict(s), "beats_random": s.beats_random} for s in summaries],
        "beats_random": bool(pairs) and all(s.beats_random for s in summaries),
    }


def measure(ranker: Ranker, questions: list, explainer: str, label: str) -> dict[str, Any]:
    """One explainer's faithfulness over ``questions``: the summaries per k and the verdict."""
    started = time.perf_counter()
    table = faithfulness_table(ranker, questions, explainer=explainer)
    return _entry(label, ranker, explainer, questions, len(table), started, summarise(table))


def measure_contrasts(ranker: Ranker, questions: list, explainer: str, label: str) -> dict[str, Any]:
    """The contrastive test over the ``questions`` where a wrong answer is ranked above a right one:
    the view's default pair (the top-ranked wrong answer, the best-ranked right one), A's top words
    by ``explainer`` deleted against random words of A (``qa_core.faithfulness.gap_deletions``)."""
    started = time.perf_counter()
    gaps = []
    for question in questions:
        result = rank_pool(ranker, question.text, question.candidates)
        pair = contrastive.default_pair(result)
        if pair is not None:
            above, below = pair
            gaps.append(gap_deletions(ranker, result.question, result.pool, result.at(above).index,
                                      result.at(below).index, result.explain(above, explainer)))
    return _entry(f"{label} contrastive", ranker, explainer, questions, len(gaps), started, summarise_gaps(gaps))


def keep_contrasts(name: str, dataset_name: str, entry: dict[str, Any]) -> None:
    """Add one model's contrastive entry to the stored ones (read again first: another run may
    have added its own meanwhile)."""
    stored = next(iter(read_results("faithfulness_contrastive")), {"datasets": {}})
    stored["machine"] = machine()
    stored["datasets"].setdefault(dataset_name, {}).setdefault("models", {})[name] = entry
    write_result("faithfulness_contrastive", stored)


def contrast_model(name: str, dataset_name: str, ranker: Ranker, dataset: Dataset, explainer: str,
                   args: argparse.Namespace, max_epochs: int | None) -> None:
    """The contrastive test of ``ranker`` (trained with the epoch cap ``max_epochs``, kept beside it)."""
    questions = sampled_questions(dataset, "test", args.contrast_questions)
    entry = measure_contrasts(ranker, questions, explainer, f"{dataset_name} TEST")
    keep_contrasts(name, dataset_name, {**entry, "max_epochs": max_epochs})


def measure_model(name: str, datasets: dict[str, Dataset], args: argparse.Namespace,
                  dev: dict[str, Any], test: dict[str, Any]) -> None:
    """Train once per dataset, every explainer on the DEV sample, the default chosen, TEST once."""
    rankers = {}
    for dataset_name, dataset in datasets.items():
        ranker, dev_map = ready_ranker(name, dataset, args.max_epochs)
        rankers[dataset_name] = (ranker, dev_map)
        questions = sampled_questions(dataset, "dev", args.dev_questions)
        entries = {e: measure(ranker, questions, e, f"{dataset_name} DEV") for e in explainers.available(ranker.capabilities)}
        dev["datasets"].setdefault(dataset_name, {}).setdefault("models", {})[name] = {
            "dev_map": dev_map, "max_epochs": args.max_epochs, "explainers": entries}
        write_result("faithfulness_dev", dev)
    dev["defaults"] = defaults(dev)
    write_result("faithfulness_dev", dev)
    default = dev["defaults"].get(name)  # the app's default: chosen over every stored DEV sample
    if default is None:
        print(f"{name}: no default until it is measured on every dataset's DEV; TEST not read", flush=True)
        return
    for dataset_name, dataset in datasets.items():
        ranker, dev_map = rankers[dataset_name]
        questions = sampled_questions(dataset, "test", args.questions)
        entry = {"dev_map": dev_map, "max_epochs": args.max_epochs,
                 **measure(ranker, questions, default, f"{dataset_name} TEST")}
        test["datasets"].setdefault(dataset_name, {}).setdefault("models", {})[name] = entry
        write_result("faithfulness", test)  # after each model: a long run keeps what it measured
        contrast_model(name, dataset_name, ranker, dataset, default, args, args.max_epochs)


def contrast_only(name: str, datasets: dict[str, Dataset], args: argparse.Namespace, dev: dict[str, Any]) -> None:
    """The contrastive test alone, of a model whose default was chosen on DEV (trained again with
    the epoch cap its DEV run had, whatever ``--max-epochs`` says now)."""
    default = dev.get("defaults", {}).get(name)
    if default is None:
        raise SystemExit(f"{name} has no default explainer yet: run it without --contrastive first")
    for dataset_name, dataset in datasets.items():
        max_epochs = dev["datasets"][dataset_name]["models"][name].get("max_epochs")
        ranker, _ = ready_ranker(name, dataset, max_epochs)
        contrast_model(name, dataset_name, ranker, dataset, default, args, max_epochs)


def _pct(value: float, summary: dict[str, Any]) -> str:
    return f"{100 * value / summary['score_range']:.1f}%" if summary["score_range"] else "-"


def _epochs(name: str, entry: dict[str, Any]) -> str:
    """The epoch cap a row was trained with; 'own' where ``--max-epochs`` does not apply to the model."""
    applies = "max_epochs" in registry.ranker_class(name).capabilities.training_settings
    return str(entry["max_epochs"]) if applies and entry.get("max_epochs") else "own"


def _of_gap(value: float, summary: dict[str, Any]) -> str:
    return f"{100 * value / summary['gap']:.1f}%" if summary["gap"] else "-"


def _p(p: float | None) -> str:
    return "-" if p is None else ("<0.001" if p < 0.001 else f"{p:.3f}")


RULE = (
    "**Default explainers: the rule, fixed before the DEV run** (`qa_core/explain/defaults.py`). Every explainer "
    "a model offers (its own weights, word occlusion, and for neural models Captum's Integrated Gradients, "
    "gradient x input and embedding occlusion) is measured on a seeded sample of DEV questions of each dataset. "
    "Per dataset and k, its margin is ((comprehensiveness - random) + (random sufficiency - sufficiency)) / 2 as "
    "a share of the model's score range; its DEV score is the mean margin over both datasets and the three k. "
    "It qualifies when it beats random words (both measures, p < 0.01, every k) on every DEV dataset. The "
    "default is the qualifying explainer with the highest DEV score, else (none qualifies) the one with the "
    "highest DEV score; equal scores go to the model's own weights first, then occlusion, Integrated Gradients, "
    "gradient x input, embedding occlusion. A model gets a default once it is measured on both DEV samples "
    "(until then its pages show its own weights and say it was not chosen on DEV; added after the run had "
    "started, when it was clear not every model would finish). Only the default is then measured on TEST, once; "
    "`tests/test_explainer_defaults.py` reproduces the choice from the stored DEV results."
)


def _dev_table(dev: dict[str, Any]) -> list[str]:
    """Every explainer's DEV score per model, the default marked (none before the explainers existed)."""
    chosen = dev.get("defaults", {})
    if not chosen:
        return []
    lines = ["### DEV: every explainer (DEV score: mean margin, % of the score range)", "",
             "| model | explainer | DEV score | beats random on | questions (per dataset) | default |",
             "|---|---|---|---|---|---|"]
    for name in sorted(chosen):
        by_dataset = {d: m["models"][name]["explainers"] for d, m in dev["datasets"].items() if name in m["models"]}
        for explainer in explainers.EXPLAINERS:
            entries = {d: e[explainer] for d, e in by_dataset.items() if explainer in e}
            if not entries:
                continue
            beats = ", ".join(d for d, e in entries.items() if e["beats_random"]) or "none"
            sizes = ", ".join(f"{d} {e['questions']}" for d, e in entries.items())
            mark = "**default**" if chosen[name] == explainer else ""
            lines.append(f"| {name} | {explainer} | {100 * dev_score(list(entries.values())):.1f}% | {beats} | "
                         f"{sizes} | {mark} |")
    lines.append("")
    return lines


def _test_table(dataset: str, models: dict[str, Any]) -> list[str]:
    """A dataset's TEST deletions per model and k against random words, and which beat them."""
    lines = [
        f"### {dataset} TEST",
        "",
        "| model | explainer | epochs | k | comprehensiveness | random | p | sufficiency | random | p | questions | pairs "
        "| seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted(models):
        entry = models[name]
        for s in entry["summaries"]:
            lines.append(
                f"| {name} | {entry.get('explainer', explainers.MODEL)} | {_epochs(name, entry)} | "
                f"{s['fraction']:.0%} | "
                f"{_pct(s['comprehensiveness'], s)} | "
                f"{_pct(s['random_comprehensiveness'], s)} | {_p(s['comprehensiveness_p'])} | "
                f"{_pct(s['sufficiency'], s)} | {_pct(s['random_sufficiency'], s)} | {_p(s['sufficiency_p'])} | "
                f"{entry.get('questions', '-')} | {entry['pairs']:,} | {entry['seconds']:.0f} |"
            )
    verdicts = ", ".join(f"{name}: {'yes' if models[name]['beats_random'] else 'no'}" for name in sorted(models))
    return lines + ["", f"Beats random words at p < 0.01 (every k, both measures): {verdicts}.", ""]


def render_section(result: dict[str, Any], dev: dict[str, Any]) -> list[str]:
    lines = [
        "## Faithfulness of the explanations",
        "",
        "Script: `benchmarks/faithfulness.py` (`qa_core.faithfulness`). For every pair, the answer's words "
        "(non-whitespace spaCy tokens) are ranked by an explainer's weights (ties in seeded random "
        "order) and the top k% deleted (comprehensiveness: score drop, higher is better) or kept alone "
        "(sufficiency: score drop, lower is better), as in ERASER (DeYoung et al. 2020); the same deletions of "
        f"random words (mean of {RANDOM_DRAWS} seeded draws) are the baseline. Every deletion is scored through "
        "`Ranker.score_edits`, the path of the Ask page's counterfactual edits. Drops are shown as a share of "
        "the model's score range over the measured pairs (scores are probabilities, BM25 sums, SVM margins or "
        "cosines). p: paired randomisation test (10,000 seeded sign flips) of the explanation's drops against "
        "random words, two-sided. 'Beats random': more comprehensive and more sufficient than random words at "
        "p < 0.01 for every k. Trainable models: seed 1, trained on TRAIN, selected on DEV. Where 'questions' is "
        "below the split's size, a seeded sample of the split's questions (all their pairs) was measured "
        "(`--dev-questions`, `--questions`), for the CPU budget; 'epochs': at most that many training epochs "
        "(`--max-epochs`, for the CPU budget; 'own': the model's own setting). A TEST model without DEV rows was "
        "measured before the explainers existed, with its own weights (40 TEST questions, trained as the rankers "
        f"benchmark trains). {machine_line(result['machine'])}.",
        "",
        RULE,
        "",
    ]
    lines += _dev_table(dev)
    for dataset in ("wikiqa", "trecqa"):
        if models := result["datasets"].get(dataset, {}).get("models", {}):
            lines += _test_table(dataset, models)
    return lines + render_contrasts(next(iter(read_results("faithfulness_contrastive")), {"datasets": {}}))


def render_contrasts(result: dict[str, Any]) -> list[str]:
    """The contrastive test's table: per model and dataset, how much of the gap A's top words close."""
    if not result["datasets"]:
        return []
    lines = [
        "### Contrastive: why A above B (TEST)",
        "",
        "The Ask page's contrastive view (`qa_core.services.contrastive`) tested as a whole. From a seeded sample "
        "of TEST questions ('questions'), those where a wrong answer is ranked above a right one, each with the "
        "view's default pair: A the top-ranked wrong answer, B the best-ranked right one. A's top k% words by the "
        "model's default explainer (its attribution to score(A) is its attribution to score(A) - score(B)) are "
        f"deleted, and the gap's narrowing is compared with that of k% random words of A (mean of {RANDOM_DRAWS} "
        "draws; the single-candidate test's deletions), by the same paired randomisation test. Narrowing is a "
        "share of the mean gap (100%: the pair ties on average; above 100%: B ends above A). The gap after an edit is scored exactly: for a "
        "pool-dependent model (bm25, overlap, fusion) in the whole edited pool, so B's score moves with A's edit. "
        "'Beats random': A's top words, deleted, move the gap further toward closing than random words do, at "
        "p < 0.01 for every k (a negative narrowing is a gap that widened: where both widen it, the top words "
        "widen it less, which counts too, as in the single-candidate test). With n pairs the "
        "exact test cannot go below p = 2/2^n: fewer than 8 pairs cannot beat random at 0.01. "
        f"{machine_line(result['machine'])}.",
        "",
        "| model | explainer | epochs | dataset | k | mean gap | narrowing | random | p | pairs | questions | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for dataset in ("wikiqa", "trecqa"):
        models = result["datasets"].get(dataset, {}).get("models", {})
        for name in sorted(models):
            entry = models[name]
            for s in entry["summaries"]:
                lines.append(f"| {name} | {entry['explainer']} | {_epochs(name, entry)} | {dataset} | {s['fraction']:.0%} | "
                             f"{s['gap']:.3g} | "
                             f"{_of_gap(s['narrowing'], s)} | {_of_gap(s['random_narrowing'], s)} | {_p(s['p'])} | "
                             f"{entry['pairs']} | {entry['questions']} | {entry['seconds']:.0f} |")
            verdicts.append(f"{name} on {dataset}: {'yes' if entry['beats_random'] else 'no'}")
    return [*lines, "", f"Beats random words at p < 0.01 (every k): {', '.join(verdicts)}.", ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=None, help="default: every registered model")
    parser.add_argument("--datasets", nargs="+", default=["wikiqa", "trecqa"])
    parser.add_argument("--dev-questions", type=int, default=None,
                        help="a seeded sample of this many DEV questions per dataset (default: all)")
    parser.add_argument("--questions", type=int, default=None,
                        help="a seeded sample of this many TEST questions per dataset (default: all)")
    parser.add_argument("--max-epochs", type=int, default=None,
                        help="train models that take max_epochs at most this many epochs (default: their own)")
    parser.add_argument("--contrast-questions", type=int, default=CONTRAST_QUESTIONS,
                        help="a seeded sample of this many TEST questions per dataset for the contrastive test")
    parser.add_argument("--contrastive", action="store_true",
                        help="only the contrastive test, of models that already have a default explainer")
    parser.add_argument("--render", action="store_true", help="only re-render the section from the stored results")
    args = parser.parse_args()
    stored = next(iter(read_results("faithfulness")), {"datasets": {}})
    test: dict[str, Any] = {"machine": stored.get("machine", machine()), "datasets": stored["datasets"]}
    dev: dict[str, Any] = next(iter(read_results("faithfulness_dev")), {"datasets": {}})
    if not args.render:
        test["machine"] = dev["machine"] = machine()
        datasets = {name: ds for name, ds in shared_datasets().items() if name in args.datasets}
        for name in args.models or registry.available():
            if args.contrastive:
                contrast_only(name, datasets, args, dev)
            else:
                measure_model(name, datasets, args, dev, test)
    print(write_section("faithfulness", render_section(test, dev)))


if __name__ == "__main__":
    main()

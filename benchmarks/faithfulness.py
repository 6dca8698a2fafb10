"""Faithfulness of every registered model's explanations on WikiQA and TrecQA TEST
(``qa_core.faithfulness``, ERASER-style): comprehensiveness and sufficiency of the top 10/20/50% of
answer words by the explanation's weights, against the same deletions of random words (mean of 5
draws), with a paired randomisation test over pairs. Trainable models are trained on TRAIN with
seed 1 and selected on DEV first (the rankers benchmark's path). Results:
``benchmarks/results/faithfulness.json``; the app reads it to say how far to trust a heatmap.

    .venv/bin/python benchmarks/faithfulness.py                 # every model, both datasets
    .venv/bin/python benchmarks/faithfulness.py --models smcnn --datasets wikiqa
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

from qa_core.faithfulness import RANDOM_DRAWS, faithfulness_table, summarise
from qa_core.rankers import registry
from qa_core.rankers.base import Ranker
from qa_core.services import analysis, store_setup
from qa_core.services.experiments import train_ranker
from qa_core.types import Dataset

SEED = 1


def ready_ranker(name: str, dataset: Dataset) -> tuple[Ranker, float | None]:
    """The model as the rankers benchmark builds it (seed 1), and its DEV MAP when trained."""
    capabilities = registry.ranker_class(name).capabilities
    if not capabilities.trainable:
        ranker = registry.create(name)
        if capabilities.learns_statistics:
            ranker.fit(dataset.split("train"), dataset.split("dev"), progress=False)
        return ranker, None
    analyzer = analysis.analyzer_for(store_setup.open_store(), name)
    with tempfile.TemporaryDirectory() as tmp:
        outcome = train_ranker(
            name, dataset, seed=SEED, progress=False, checkpoint=Path(tmp) / "model.pt", analyzer=analyzer
        )
    return outcome.ranker, outcome.metrics["dev_map"]


def test_questions(dataset: Dataset, sample: int | None) -> list:
    """TEST, or a seeded sample of ``sample`` of its questions (every pair of each): the deletions
    cost 36 scorings per pair, too many for every model on a busy 2-core machine."""
    questions = dataset.split("test")
    if sample is None or sample >= len(questions):
        return questions
    return random.Random(SEED).sample(questions, sample)


def measure(name: str, dataset: Dataset, sample: int | None) -> dict[str, Any]:
    ranker, dev_map = ready_ranker(name, dataset)
    started = time.perf_counter()
    questions = test_questions(dataset, sample)
    table = faithfulness_table(ranker, questions)
    seconds = time.perf_counter() - started
    summaries = summarise(table)
    entry = {
        "dev_map": dev_map,
        "questions": len(questions),
        "pairs": len(table),
        "seconds": round(seconds, 1),
        "summaries": [{**dataclasses.asdict(s), "beats_random": s.beats_random} for s in summaries],
        "beats_random": all(s.beats_random for s in summaries),
    }
    print(dataset.name, name, f"{len(table)} pairs, {seconds:.0f} s", flush=True)
    return entry


def _pct(value: float, summary: dict[str, Any]) -> str:
    return f"{100 * value / summary['score_range']:.1f}%" if summary["score_range"] else "-"


def _p(p: float | None) -> str:
    return "-" if p is None else ("<0.001" if p < 0.001 else f"{p:.3f}")


def render_section(result: dict[str, Any]) -> list[str]:
    lines = [
        "## Faithfulness of the explanations",
        "",
        "Script: `benchmarks/faithfulness.py` (`qa_core.faithfulness`). For every TEST pair, the answer's words "
        "(non-whitespace spaCy tokens) are ranked by the model's own `explain` weights (ties in seeded random "
        "order) and the top k% deleted (comprehensiveness: score drop, higher is better) or kept alone "
        "(sufficiency: score drop, lower is better), as in ERASER (DeYoung et al. 2020); the same deletions of "
        f"random words (mean of {RANDOM_DRAWS} seeded draws) are the baseline. Every deletion is scored through "
        "`Ranker.score_edits`, the path of the Ask page's counterfactual edits. Drops are shown as a share of "
        "the model's score range over the TEST pairs (scores are probabilities, BM25 sums, SVM margins or "
        "cosines). p: paired randomisation test (10,000 seeded sign flips) of the explanation's drops against "
        "random words, two-sided. 'Beats random': more comprehensive and more sufficient than random words at "
        "p < 0.01 for every k. Trainable models: seed 1, trained on TRAIN, selected on DEV. Where 'questions' is "
        "below the split's size, a seeded sample of TEST questions (all their pairs) was measured "
        f"(`--questions`), for the CPU budget. {machine_line(result['machine'])}.",
        "",
    ]
    for dataset in ("wikiqa", "trecqa"):
        models = result["datasets"].get(dataset, {}).get("models", {})
        if not models:
            continue
        lines += [
            f"### {dataset} TEST",
            "",
            "| model | k | comprehensiveness | random | p | sufficiency | random | p | questions | pairs | seconds |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name in sorted(models):
            entry = models[name]
            for s in entry["summaries"]:
                lines.append(
                    f"| {name} | {s['fraction']:.0%} | {_pct(s['comprehensiveness'], s)} | "
                    f"{_pct(s['random_comprehensiveness'], s)} | {_p(s['comprehensiveness_p'])} | "
                    f"{_pct(s['sufficiency'], s)} | {_pct(s['random_sufficiency'], s)} | {_p(s['sufficiency_p'])} | "
                    f"{entry.get('questions', '-')} | {entry['pairs']:,} | {entry['seconds']:.0f} |"
                )
        verdicts = ", ".join(f"{name}: {'yes' if models[name]['beats_random'] else 'no'}" for name in sorted(models))
        lines += ["", f"Beats random words at p < 0.01 (every k, both measures): {verdicts}.", ""]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=None, help="default: every registered model")
    parser.add_argument("--datasets", nargs="+", default=["wikiqa", "trecqa"])
    parser.add_argument("--questions", type=int, default=None,
                        help="a seeded sample of this many TEST questions per dataset (default: all)")
    parser.add_argument("--render", action="store_true", help="only re-render the section from the stored results")
    args = parser.parse_args()
    stored = next(iter(read_results("faithfulness")), {"datasets": {}})
    result: dict[str, Any] = {"machine": stored.get("machine", machine()), "datasets": stored["datasets"]}
    if not args.render:
        result["machine"] = machine()
        datasets = {name: ds for name, ds in shared_datasets().items() if name in args.datasets}
        for name in args.models or registry.available():
            for dataset_name, dataset in datasets.items():
                models = result["datasets"].setdefault(dataset_name, {}).setdefault("models", {})
                models[name] = measure(name, dataset, args.questions)
                write_result("faithfulness", result)  # after each model: a long run keeps what it measured
    print(write_section("faithfulness", render_section(result)))


if __name__ == "__main__":
    main()

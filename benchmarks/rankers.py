"""Rankers on TrecQA and WikiQA: train on TRAIN, select on DEV, report TEST (raw and clean), over
seeds for trainable models, with training time and scoring throughput. One result file per model
(``benchmarks/results/ranker_<name>.json``); ``benchmarks/report.py`` renders docs/benchmarks.md.

    .venv/bin/python benchmarks/rankers.py --models bm25 overlap smcnn --seeds 1 2 3 4 5
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from common import machine, machine_line, mean_std, read_results, shared_datasets, write_result, write_section

from qa_core.experiments import evaluate_ranker, score_questions, train_ranker
from qa_core.rankers import registry
from qa_core.rankers.base import Ranker
from qa_core.text.nlp import parse_many
from qa_core.types import Dataset, Question

METRICS = ("map", "mrr", "p@1", "ndcg@10")
MODEL_ORDER = ("bm25", "overlap", "smcnn", "cnn_wo_so", "mphcnn", "attention_lstm", "global_local", "tree_kernel", "ensemble")

# Published rows to measure against (MAP, MRR); see shared/papers/*.md for where each comes from.
PUBLISHED = {
    "trecqa": [
        ("SM-CNN, TRAIN (Severyn & Moschitti 2015)", "raw", 0.7329, 0.7962),
        ("SM-CNN, TRAIN-ALL (Severyn & Moschitti 2015)", "raw", 0.7459, 0.8078),
        ("SM-CNN re-implemented, TRAIN-ALL (Nicosia 2018)", "clean", 0.7654, 0.8186),
        ("CNN_WO, TRAIN-ALL (Nicosia 2018)", "clean", 0.7649, 0.8422),
        ("CNN_WO+SO, TRAIN-ALL (Nicosia 2018)", "clean", 0.7793, 0.8489),
        ("tree kernels V_adv, 824 TREC 11-12 train questions (Nicosia 2018, Table 6.4)", "?", 0.5627, 0.6294),
        ("tree kernels CH+V_adv, 824 TREC 11-12 train questions (Nicosia 2018, Table 6.4)", "?", 0.6611, 0.7419),
        ("tree kernels CH+V_adv+F, 824 TREC 11-12 train questions (Nicosia 2018, Table 6.4)", "?", 0.6829, 0.7520),
    ],
    "wikiqa": [
        ("SM-CNN re-implemented (Nicosia 2018)", "filtered", 0.6951, 0.7107),
        ("CNN_WO (Nicosia 2018)", "filtered", 0.6953, 0.7135),
        ("CNN_WO+SO (Nicosia 2018)", "filtered", 0.7224, 0.7391),
        ("best listed (Wang & Jiang 2017)", "filtered", 0.7433, 0.7540),
    ],
    # Other data, not comparable with the tables above (benchmarks/recurrent_selection.py lists
    # them apart). Bachrach et al. 2017 evaluate on InsuranceQA; their Table I was lost.
    "semeval2016": [
        ("attention LSTM alone (Romeo et al. 2016)", "question reranking, test", 0.6796, 0.7663),
        ("Google first-stage rank (Romeo et al. 2016)", "question reranking, test", 0.7475, 0.8379),
    ],
}


def evaluate_both(ranker: Ranker, questions: list[Question]) -> dict[str, dict[str, float]]:
    raw = evaluate_ranker(ranker, questions)
    clean = evaluate_ranker(ranker, questions, clean=True)
    return {
        "raw": {**raw.aggregate, "questions": raw.questions},
        "clean": {**clean.aggregate, "questions": clean.questions},
    }


def throughput(ranker: Ranker, questions: list[Question]) -> float:
    """Scored pairs per second over the split (texts already parsed: the model's own cost)."""
    pairs = sum(len(q.candidates) for q in questions)
    score_questions(ranker, questions)  # warm-up: vocabulary growth, allocator, kernels
    started = time.perf_counter()
    score_questions(ranker, questions)
    return pairs / (time.perf_counter() - started)


def run_model(name: str, dataset: Dataset, seeds: list[int]) -> dict[str, Any]:
    test = dataset.split("test")
    if not registry.ranker_class(name).trainable:
        ranker = registry.create(name)
        if type(ranker).fit is not Ranker.fit:  # label-free statistics (IDF) from train + dev
            ranker.fit(dataset.split("train"), dataset.split("dev"), progress=False)
        return {"seeds": [], "runs": [{**evaluate_both(ranker, test), "pairs_per_second": throughput(ranker, test)}]}
    runs = []
    for seed in seeds:
        with tempfile.TemporaryDirectory() as tmp:
            outcome = train_ranker(name, dataset, seed=seed, progress=False, checkpoint=Path(tmp) / "model.pt")
        run = {
            "seed": seed,
            "train_seconds": outcome.report["seconds"],
            "best_epoch": outcome.report.get("best_epoch"),
            "dev_map": outcome.metrics["dev_map"],
            **evaluate_both(outcome.ranker, test),
            "pairs_per_second": throughput(outcome.ranker, test),
        }
        runs.append(run)
        print(dataset.name, name, seed, f"dev {run['dev_map']:.4f}", f"test raw {run['raw']['map']:.4f}",
              f"clean {run['clean']['map']:.4f}", f"{run['train_seconds']}s", flush=True)
    return {"seeds": seeds, "runs": runs}


def summarise(entry: dict[str, Any]) -> dict[str, Any]:
    """Mean and std over runs of every metric, per setting."""
    runs = entry["runs"]
    return {
        mode: {metric: mean_std([r[mode][metric] for r in runs]) for metric in METRICS} for mode in ("raw", "clean")
    }


def _cell(values: list[float] | tuple[float, float], runs: int) -> str:
    mean, std = values
    return f"{mean:.4f} ± {std:.4f}" if runs > 1 else f"{mean:.4f}"


def render_section() -> list[str]:
    """The rankers section of docs/benchmarks.md from every ``ranker_*.json``."""
    results = {r["model"]: r for r in read_results("ranker_*")}
    models = [m for m in MODEL_ORDER if m in results] + sorted(set(results) - set(MODEL_ORDER))
    lines = [
        "## Rankers on TrecQA and WikiQA",
        "",
        "Script: `benchmarks/rankers.py` (one result file per model). Setup: train on TRAIN, select on DEV "
        "MAP, report TEST as mean ± std over seeds (baselines have no seed). Deviations from the papers: "
        "GloVe 6B 50d instead of their word2vec vectors; TrecQA TRAIN (94 questions), not TRAIN-ALL "
        "(1,229, not in our data); spaCy tokenisation. WikiQA as shipped has questions without a correct "
        "answer removed (the common 'filtered' setting), so its raw rows are that setting; clean also "
        "drops questions whose candidates are all correct. Raw TrecQA keeps the 95 TEST questions that have "
        "candidates (5 have none), those without a correct answer scoring AP 0 (trec_eval semantics); "
        "clean keeps the 68 with both correct and incorrect candidates. Training times are wall-clock on a "
        "shared machine (other jobs were running): read them as rough.",
        "",
    ]
    for dataset in ("trecqa", "wikiqa"):
        lines += [f"### {dataset} TEST", "",
                  "| model | setting | MAP | MRR | P@1 | nDCG@10 | questions | seeds | train s/seed | pairs/s |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        machines = set()
        for model in models:
            entry = results[model]["datasets"].get(dataset)
            if entry is None:
                continue
            machines.add(machine_line(results[model]["machine"]))
            runs = entry["runs"]
            seconds = [r["train_seconds"] for r in runs if "train_seconds" in r]
            train = f"{mean_std(seconds)[0]:.1f}" if seconds else "-"
            speed = f"{mean_std([r['pairs_per_second'] for r in runs])[0]:,.0f}"
            for mode in ("raw", "clean"):
                summary = entry["summary"][mode]
                cells = " | ".join(_cell(summary[m], len(runs)) for m in METRICS)
                lines.append(f"| **{model}** | {mode} | {cells} | {runs[0][mode]['questions']} | "
                             f"{len(entry['seeds']) or '-'} | {train} | {speed} |")
        for label, setting, map_, mrr in PUBLISHED[dataset]:
            lines.append(f"| {label}, published | {setting} | {map_:.4f} | {mrr:.4f} | | | | | | |")
        lines += ["", *(f"Machine: {m}." for m in sorted(machines)), ""]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=[], choices=registry.available(),
                        help="models to run; none: only re-render the section from the stored results")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--datasets", nargs="+", default=["trecqa", "wikiqa"])
    args = parser.parse_args()

    datasets = {name: ds for name, ds in shared_datasets().items() if name in args.datasets} if args.models else {}
    parse_seconds = {}
    for name, dataset in datasets.items():
        started = time.perf_counter()
        parse_many([q.text for q in dataset.questions] + [c.text for q in dataset.questions for c in q.candidates])
        parse_seconds[name] = round(time.perf_counter() - started, 1)
    for model in args.models:
        result: dict[str, Any] = {"model": model, "machine": machine(), "datasets": {}}
        for name, dataset in datasets.items():
            entry = run_model(model, dataset, args.seeds)
            entry["summary"] = summarise(entry)
            entry["parse_seconds"] = parse_seconds[name]
            result["datasets"][name] = entry
        print(write_result(f"ranker_{model}", result))
    print(write_section("rankers", render_section()))


if __name__ == "__main__":
    main()

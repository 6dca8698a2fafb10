"""SM-CNN on TrecQA and WikiQA (train TRAIN, select on DEV, test TEST; raw and clean), over seeds,
beside the BM25 and IDF word-overlap baselines. Writes benchmarks/results/smcnn.json; then run
benchmarks/report.py to refresh docs/benchmarks.md.

    .venv/bin/python benchmarks/smcnn.py --seeds 1 2 3 4 5
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import machine, mean_std, shared_datasets, write_result

from qa_core.experiments import evaluate_ranker, train_ranker
from qa_core.rankers import registry
from qa_core.text.nlp import parse_many

METRICS = ("map", "mrr", "p@1", "ndcg@10")


def evaluate_both(ranker, questions) -> dict[str, dict[str, float]]:
    raw = evaluate_ranker(ranker, questions)
    clean = evaluate_ranker(ranker, questions, clean=True)
    return {
        "raw": {**raw.aggregate, "questions": raw.questions},
        "clean": {**clean.aggregate, "questions": clean.questions},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--datasets", nargs="+", default=["trecqa", "wikiqa"])
    args = parser.parse_args()

    results: dict = {"machine": machine(), "seeds": args.seeds, "datasets": {}}
    for name, dataset in shared_datasets().items():
        if name not in args.datasets:
            continue
        started = time.perf_counter()
        parse_many([q.text for q in dataset.questions] + [c.text for q in dataset.questions for c in q.candidates])
        entry: dict = {"parse_seconds": round(time.perf_counter() - started, 1), "baselines": {}, "smcnn": []}
        train, test = dataset.split("train"), dataset.split("test")
        for baseline in ("bm25", "overlap"):
            ranker = registry.create(baseline)
            if baseline == "overlap":
                ranker.fit(train, dataset.split("dev"), progress=False)
            entry["baselines"][baseline] = evaluate_both(ranker, test)
        for seed in args.seeds:
            with tempfile.TemporaryDirectory() as tmp:
                outcome = train_ranker(
                    "smcnn", dataset, seed=seed, progress=False, checkpoint=Path(tmp) / "smcnn.pt"
                )
            run = {"seed": seed, "train_seconds": outcome.report["seconds"],
                   "best_epoch": outcome.report.get("best_epoch"),
                   "dev_map": outcome.metrics["dev_map"], **evaluate_both(outcome.ranker, test)}
            entry["smcnn"].append(run)
            print(name, seed, f"dev {run['dev_map']:.4f}", f"test raw {run['raw']['map']:.4f}",
                  f"clean {run['clean']['map']:.4f}", f"{run['train_seconds']}s", flush=True)
        for mode in ("raw", "clean"):
            entry[f"smcnn_{mode}"] = {
                metric: mean_std([r[mode][metric] for r in entry["smcnn"]]) for metric in METRICS
            }
        results["datasets"][name] = entry
    print(write_result("smcnn", results))


if __name__ == "__main__":
    main()

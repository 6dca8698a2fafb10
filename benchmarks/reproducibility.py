"""Bit-identical reruns: one SM-CNN version on the demo corpus (the CLI's default settings, seed 3)
trained again by ``python -m qa_core reproduce``'s service three times as the machine is and three
times with two busy processes beside it, then once with another thread count; and SM-CNN seed 3 on
WikiQA (the issue's case) trained twice with 1 thread and once with 2. Writes
``results/reproducibility.json`` and its section of docs/benchmarks.md.

    .venv/bin/python benchmarks/reproducibility.py
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from typing import Any

from common import ROOT, machine, machine_line, shared_datasets, write_result, write_section

from db.base import NewVersion

SEED = 3
RERUNS = 3
BUSY_PROCESSES = 2


def _spin(stop: Any) -> None:
    """Load: one core busy with float work until ``stop`` is set."""
    x = 0.0
    while not stop.is_set():
        for i in range(100_000):
            x += i * 1e-9


def _rerun(store: Any) -> dict[str, Any]:
    from qa_core.services.reproduce import reproduce

    started = time.perf_counter()
    result = reproduce(store, "smcnn", "demo", 1).to_dict()
    return {"seconds": round(time.perf_counter() - started, 1), "identical": result["identical"],
            "max_weight_difference": result["max_weight_difference"],
            "largest_metric_difference": max(abs(m["difference"]) for m in result["metrics"].values())}


def wikiqa_threads() -> dict[str, Any]:
    """SM-CNN seed 3 on WikiQA: 1 thread twice, then 2 threads; weights and DEV/TEST MAP compared."""
    from qa_core.checkpoints import new_checkpoint_path
    from qa_core.services.experiments import evaluate_ranker, train_ranker
    from qa_core.services.reproduce import weight_difference

    dataset = shared_datasets()["wikiqa"]
    runs = []
    for threads in (1, 1, 2):
        outcome = train_ranker("smcnn", dataset, seed=SEED, progress=False, threads=threads,
                               checkpoint=new_checkpoint_path("smcnn", "wikiqa", f"threads{threads}"))
        runs.append({"threads": threads, "dev_map": outcome.metrics["dev_map"],
                     "test_map": evaluate_ranker(outcome.ranker, dataset.split("test")).aggregate["map"],
                     "best_epoch": outcome.report.get("best_epoch"), "seconds": outcome.report["seconds"],
                     "sha256": outcome.provenance["checkpoint_sha256"], "checkpoint": str(outcome.checkpoint)})
    for run in runs[1:]:
        run["max_weight_difference"] = weight_difference(runs[0]["checkpoint"], run["checkpoint"])
    for run in runs:
        del run["checkpoint"]  # a temporary file
    return {"runs": runs}


def measure(folder: str) -> dict[str, Any]:
    # A fresh store and data folder; the worktree's spaCy parse cache (WikiQA parses in minutes).
    os.environ.setdefault("RERANK_LAB_PARSE_CACHE", str(ROOT / "data" / "parse_cache.sqlite"))
    os.environ["RERANK_LAB_DATA"] = folder
    from db.store import Store
    from qa_core.checkpoints import new_checkpoint_path
    from qa_core.data.demo import load_demo
    from qa_core.services.experiments import EVAL_SPLIT, train_ranker, version_record
    from qa_core.services.reproduce import weight_difference

    store = Store(f"sqlite:///{folder}/store.sqlite")
    store.datasets.import_dataset(load_demo())
    dataset = store.datasets.load_dataset("demo")

    def train(threads: int) -> tuple[Any, dict[str, Any]]:
        outcome = train_ranker("smcnn", dataset, seed=SEED, progress=False, threads=threads,
                               checkpoint=new_checkpoint_path("smcnn", "demo", f"threads{threads}"))
        return outcome, version_record(outcome, dataset, dataset.split(EVAL_SPLIT), seed=SEED, train_split="train",
                                       dev_split="dev", extra={"labels": "gold", "trained_by": "cli"})

    stored, (training_data, metrics) = train(1)
    store.models.register_model("smcnn", NewVersion("smcnn", str(stored.checkpoint), training_data, metrics))
    idle = [_rerun(store) for _ in range(RERUNS)]
    stop = multiprocessing.Event()
    busy = [multiprocessing.Process(target=_spin, args=(stop,)) for _ in range(BUSY_PROCESSES)]
    for process in busy:
        process.start()
    try:
        loaded = [_rerun(store) for _ in range(RERUNS)]
    finally:
        stop.set()
        for process in busy:
            process.join()
    other, (_, other_metrics) = train(2)
    keys = [k for k in metrics if k.startswith(("dev_", "test_gold_")) and k in other_metrics]
    return {
        "machine": machine(),
        "setup": {"model": "smcnn", "data": "demo", "seed": SEED, "settings": "defaults (the CLI's)", "threads": 1},
        "idle": idle,
        "loaded": loaded,
        "two_threads": {
            "max_weight_difference": weight_difference(stored.checkpoint, other.checkpoint),
            "metric_differences": {k: other_metrics[k] - metrics[k] for k in keys},
            "best_epoch": [stored.report.get("best_epoch"), other.report.get("best_epoch")],
        },
        "wikiqa": wikiqa_threads(),
    }


def render(result: dict[str, Any]) -> list[str]:
    def runs(rows: list[dict[str, Any]]) -> str:
        same = sum(row["identical"] for row in rows)
        seconds = ", ".join(f"{row['seconds']:.0f}" for row in rows)
        return (f"{same} of {len(rows)} identical (checkpoint bytes and every DEV and TEST metric; largest weight "
                f"difference {max(row['max_weight_difference'] for row in rows):g}); {seconds} s each")

    threads = result["two_threads"]
    wiki = result["wikiqa"]["runs"]
    moved = ("leaves every DEV and TEST metric as it was" if not any(threads["metric_differences"].values()) else
             "moves the metrics by " + ", ".join(f"{k} {v:+.4f}" for k, v in threads["metric_differences"].items()))
    return [
        "## Reproducibility: the same version trained again",
        "",
        "Script: `benchmarks/reproducibility.py`. SM-CNN on the demo corpus with the CLI's default settings, seed "
        f"{result['setup']['seed']}, 1 thread (the default, `RERANK_LAB_TRAINING_THREADS`), registered once and "
        f"trained again by `python -m qa_core reproduce`'s service {RERUNS} times as the machine was (a 2-core "
        "machine shared with four other engineers' jobs: never idle) and "
        f"{RERUNS} times with {BUSY_PROCESSES} more busy processes beside it:",
        "",
        f"- as the machine was: {runs(result['idle'])};",
        f"- loaded: {runs(result['loaded'])}.",
        "",
        "Training runs with a fixed thread count and torch's deterministic algorithms (`qa_core.training."
        "reproducibility`); the IDF table used to be saved in set order, which follows the process's string "
        "hashing, so two trainings in two processes wrote different checkpoint bytes (same weights). Load changes "
        "timing only. The thread count changes the order of float sums in torch's CPU kernels: the same "
        f"version trained with 2 threads differs in its weights by up to {threads['max_weight_difference']:.3g} "
        f"and {moved} (best epoch {threads['best_epoch'][0]} -> {threads['best_epoch'][1]}) on the demo; on WikiQA "
        "it moves the result (below). "
        "So a version records its thread count and `reproduce` uses it. GPU training sets cuDNN's deterministic "
        "mode and a fixed cuBLAS workspace, but no GPU was available: GPU reruns are not measured.",
        "",
        f"SM-CNN seed {result['setup']['seed']} on WikiQA (default settings; the issue's case, a stored DEV 0.7394 "
        "retrained to 0.7331 before this change):",
        "",
        "| threads | DEV MAP | TEST MAP | best epoch | checkpoint bytes | largest weight difference | train s |",
        "|---|---|---|---|---|---|---|",
        *(f"| {run['threads']} | {run['dev_map']:.4f} | {run['test_map']:.4f} | {run['best_epoch']} | "
          f"{'the first run' if i == 0 else ('identical' if run['sha256'] == wiki[0]['sha256'] else 'differ')} | "
          f"{run.get('max_weight_difference', 0):.3g} | {run['seconds']:.0f} |" for i, run in enumerate(wiki)),
        "",
        "With 1 thread the two trainings wrote the same bytes. With 2 threads (torch's default on this 2-core "
        "machine, which the CLI used before this change) the best DEV epoch moved and with it DEV MAP by "
        f"{wiki[2]['dev_map'] - wiki[0]['dev_map']:+.4f} and TEST MAP by {wiki[2]['test_map'] - wiki[0]['test_map']:+.4f}: "
        f"{wiki[2]['dev_map']:.4f} / {wiki[2]['test_map']:.4f} are the issue's retrained numbers to the fourth "
        "decimal, so that rerun differed by its thread count. The stored 0.7394 / 0.6679 (seed 3 of "
        "`results/ranker_smcnn.json`, an older commit, on an AMD EPYC) is neither run here: it recorded no thread "
        "count or commit, and torch's CPU kernels choose their vector instructions by CPU, so another CPU model may "
        "give other bits even at the same thread count (one machine here: not measured). Versions trained from now "
        "on record commit, threads and libraries; `reproduce` says which of them differ.",
        "",
        f"Machine: {machine_line(result['machine'])}.",
    ]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="reproducibility-") as folder:
        result = measure(folder)
    write_result("reproducibility", result)
    write_section("reproducibility", render(result))


if __name__ == "__main__":
    main()

"""The fusion ranker's default members and method (``qa_core/rankers/score_fusion.py``), chosen on DEV
from the DEV runs that ``benchmarks/rankers.py`` kept; TEST runs are not read.

Rule fixed before the run: candidates are a neural member among smcnn, cnn_wo and compare_aggregate
(the stacker's neural members) with a lexical member, bm25 or overlap, fused by each method of
``qa_core.fusion.METHODS``. A candidate's score is its held-out DEV MAP under 3x repeated 2-fold
cross-validation over DEV's questions (``tune_fusion`` on one half, MAP of ``apply_fusion`` on the
other), averaged over the neural member's seeds 1-5 and over TrecQA and WikiQA. The default is the
candidate with the highest score. Prints the table (nothing is written).

    .venv/bin/python benchmarks/fusion_default.py
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict

from common import shared_datasets
from rankers import RUNS

from qa_core.evaluation import evaluate, qrels_from_questions
from qa_core.fusion import METHODS, apply_fusion, tune_fusion
from qa_core.services.stored_runs import read_run

NEURAL, LEXICAL, SEEDS, REPEATS = ("smcnn", "cnn_wo", "compare_aggregate"), ("bm25", "overlap"), range(1, 6), 3


def held_out_map(method: str, runs: dict, qrels: dict) -> float:
    """Mean MAP on one half of DEV's questions of the fusion tuned on the other half."""
    qids = sorted(q for q, grades in qrels.items() if any(g > 0 for g in grades.values()))
    scores = []
    for repeat in range(REPEATS):
        shuffled = random.Random(repeat).sample(qids, len(qids))
        for tune_half, check_half in ((shuffled[::2], shuffled[1::2]), (shuffled[1::2], shuffled[::2])):
            def part(qs: list[str]) -> dict:
                return {name: {q: run[q] for q in qs if q in run} for name, run in runs.items()}

            recipe = tune_fusion(method, part(tune_half), {q: qrels[q] for q in tune_half})
            fused = apply_fusion(recipe, part(check_half))
            scores.append(evaluate(fused, {q: qrels[q] for q in check_half}).aggregate["map"])
    return statistics.fmean(scores)


def main() -> None:
    results: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for dataset, data in shared_datasets().items():
        qrels = qrels_from_questions(data.split("dev"))
        lexical = {name: read_run(RUNS / dataset / f"{name}.dev.run.gz") for name in LEXICAL}
        for neural in NEURAL:
            for seed in SEEDS:
                neural_run = read_run(RUNS / dataset / f"{neural}.seed{seed}.dev.run.gz")
                for name, run in lexical.items():
                    for method in METHODS:
                        score = held_out_map(method, {neural: neural_run, name: run}, qrels)
                        results[(neural, name, method)][dataset].append(score)
    rows = sorted(((statistics.fmean(statistics.fmean(v) for v in by.values()), key, by)
                   for key, by in results.items()), reverse=True)  # fmt: skip
    print("| neural | lexical | method | mean | " + " | ".join(rows[0][2]) + " |")
    for mean, (neural, name, method), by in rows:
        print(f"| {neural} | {name} | {method} | {mean:.4f} | "
              + " | ".join(f"{statistics.fmean(v):.4f}" for v in by.values()) + " |")


if __name__ == "__main__":
    main()

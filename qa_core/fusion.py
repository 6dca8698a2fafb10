"""Score-level ensembles of rankers: z-normalised sums of runs, members chosen on DEV.

Runs are ``{qid: {doc_id: score}}`` (ir-measures' dict form). Scores of different models live on
different scales (a CNN's logit, BM25's sum of IDFs, an SVM margin), so each run is standardised
per question before summing. ``ranx.fuse`` has this ("zmuv" + "wsum"), but it would pull
matplotlib, seaborn, ir_datasets and fastparquet into the app for a dozen lines of arithmetic.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import numpy as np

from qa_core.evaluation import evaluate
from qa_core.types import InputError

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, int]]


def znorm(run: Run) -> dict[str, dict[str, float]]:
    """Each question's scores minus their mean, over their (population) std; a constant pool gets 0s."""
    normalised = {}
    for qid, scores in run.items():
        values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
        std = values.std()
        z = (values - values.mean()) / std if std > 0 else np.zeros_like(values)
        normalised[qid] = dict(zip(scores, z.tolist()))
    return normalised


def fuse(runs: Mapping[str, Run], weights: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """Weighted sum of the members' z-normalised runs; every member must score the same pools."""
    members = [name for name, weight in weights.items() if weight]
    if not members:
        raise InputError("an ensemble needs at least one member with a non-zero weight")
    normalised = {name: znorm(runs[name]) for name in members}
    first = normalised[members[0]]
    for name in members[1:]:
        if {q: set(d) for q, d in normalised[name].items()} != {q: set(d) for q, d in first.items()}:
            raise InputError(f"runs {members[0]!r} and {name!r} do not score the same question-candidate pairs")
    return {
        qid: {doc: sum(weights[name] * normalised[name][qid][doc] for name in members) for doc in docs}
        for qid, docs in first.items()
    }


def rank_members(dev_runs: Mapping[str, Run], dev_qrels: Qrels) -> list[str]:
    """Run names by DEV MAP, best first (ties by name, so the order is reproducible)."""
    scored = {name: evaluate(run, dev_qrels).aggregate["map"] for name, run in dev_runs.items()}
    return sorted(scored, key=lambda name: (-scored[name], name))


def _restrict(run: Run, qids: set[str]) -> dict[str, Mapping[str, float]]:
    return {qid: docs for qid, docs in run.items() if qid in qids}


def select_members(
    dev_runs: Mapping[str, Run], dev_qrels: Qrels, sizes: Sequence[int] = (1, 2, 3, 4, 5), repeats: int = 5
) -> tuple[dict[str, float], float]:
    """Equal weights on the k runs with the best DEV MAP, k chosen by repeated 2-fold
    cross-validation over DEV's questions (rank the runs on one half, score the top-k sum on the
    other; ties go to the smaller k). Returns the members' weights and their DEV MAP.

    Why not tuned weights: on WikiQA's 126 DEV questions, greedy forward selection with free weights
    fitted DEV noise. Cross-validated on DEV, it scored 0.7411 MAP against 0.7472 for the top 3 with
    equal weights (TrecQA: 0.8383 against 0.8459; docs/benchmarks.md).
    """
    if not dev_runs:
        raise InputError("no runs to build an ensemble from")
    qids = sorted(dev_qrels)
    sizes = sorted({size for size in sizes if 1 <= size <= len(dev_runs)}) or [1]
    totals = dict.fromkeys(sizes, 0.0)
    for repeat in range(repeats if len(qids) > 1 else 0):
        shuffled = random.Random(repeat).sample(qids, len(qids))
        for fit_half, check_half in ((shuffled[::2], shuffled[1::2]), (shuffled[1::2], shuffled[::2])):
            fit, check = set(fit_half), set(check_half)
            order = rank_members({name: _restrict(run, fit) for name, run in dev_runs.items()},
                                 _restrict(dev_qrels, fit))  # fmt: skip
            check_runs = {name: _restrict(run, check) for name, run in dev_runs.items()}
            for size in sizes:
                fused = fuse(check_runs, dict.fromkeys(order[:size], 1.0))
                totals[size] += evaluate(fused, _restrict(dev_qrels, check)).aggregate["map"]
    best = max(sizes, key=lambda size: (totals[size], -size))
    weights = dict.fromkeys(rank_members(dev_runs, dev_qrels)[:best], 1.0)
    return weights, evaluate(fuse(dev_runs, weights), dev_qrels).aggregate["map"]

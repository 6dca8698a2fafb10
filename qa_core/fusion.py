"""Score-level ensembles of rankers: z-normalised weighted sums of runs, members chosen on DEV.

Runs are ``{qid: {doc_id: score}}`` (ir-measures' dict form). Scores of different models live on
different scales (a CNN's logit, BM25's sum of IDFs, an SVM margin), so each run is standardised
per question before summing. ``ranx.fuse`` has this ("zmuv" + "wsum"), but it would pull
matplotlib, seaborn, ir_datasets and fastparquet into the app for a dozen lines of arithmetic.
"""

from __future__ import annotations

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


def select_members(
    dev_runs: Mapping[str, Run], dev_qrels: Qrels, weight_grid: Sequence[float] = (0.5, 1.0), min_gain: float = 1e-4
) -> tuple[dict[str, float], float]:
    """Greedy forward selection on DEV MAP: start from the best single run, then repeatedly add the
    (member, weight) that raises DEV MAP most, until nothing gains ``min_gain``. Returns the weights
    of the chosen members and their DEV MAP. Greedy, not a full grid: the grid grows as
    ``len(weight_grid) ** members`` and overfits DEV with few questions."""
    if not dev_runs:
        raise InputError("no runs to build an ensemble from")

    def dev_map(weights: Mapping[str, float]) -> float:
        return evaluate(fuse(dev_runs, weights), dev_qrels).aggregate["map"]

    scored = sorted(((dev_map({name: 1.0}), name) for name in sorted(dev_runs)), key=lambda item: -item[0])
    best_map, first = scored[0]
    chosen = {first: 1.0}
    while True:
        trials = [
            (dev_map({**chosen, name: weight}), name, weight)
            for name in sorted(set(dev_runs) - set(chosen))
            for weight in weight_grid
        ]
        if not trials:
            break
        trial_map, name, weight = max(trials, key=lambda item: item[0])
        if trial_map < best_map + min_gain:
            break
        chosen[name], best_map = weight, trial_map
    return chosen, best_map

"""Paired comparisons of two systems over the same questions: per-question AP, randomisation test,
minimum detectable difference. (A stop-gap until ``qa_core/significance.py`` exists.)

Per-question AP of a system with several seeds is the mean over its seeds, so a test compares the
systems as the seed averages reported in the tables, question by question.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats

from qa_core.evaluation import evaluate

PERMUTATIONS = 10_000
ALPHA = 0.05
POWER = 0.8

Run = Mapping[str, Mapping[str, float]]


def per_question_ap(runs: Sequence[Run], qrels: Mapping[str, Mapping[str, int]], clean: bool) -> dict[str, float]:
    """AP per question, averaged over the runs (seeds); questions as ``evaluate`` keeps them."""
    frames = [evaluate(run, qrels, clean=clean).per_query["map"] for run in runs]
    mean = sum(frame for frame in frames) / len(frames)
    return {str(qid): float(value) for qid, value in mean.items()}


def randomisation_p(first: Mapping[str, float], second: Mapping[str, float], seed: int = 0) -> float:
    """Two-sided p of a paired randomisation (sign-flip) test on the mean per-question difference,
    ``PERMUTATIONS`` resamples (scipy's ``permutation_test``, paired samples)."""
    qids = sorted(first)
    a = np.array([first[q] for q in qids])
    b = np.array([second[q] for q in qids])
    result = stats.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        n_resamples=PERMUTATIONS,
        alternative="two-sided",
        vectorized=True,
        random_state=seed,
    )
    return float(result.pvalue)


def minimum_detectable_difference(first: Mapping[str, float], second: Mapping[str, float]) -> float:
    """Smallest mean AP difference a two-sided paired test at ``ALPHA`` detects with ``POWER``,
    given the spread of these per-question differences: (z_{1-alpha/2} + z_power) * sd / sqrt(n)."""
    differences = np.array([first[q] - second[q] for q in sorted(first)])
    z = stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(POWER)
    return float(z * differences.std(ddof=1) / np.sqrt(len(differences)))

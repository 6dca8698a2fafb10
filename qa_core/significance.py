"""Compare 2-N runs on the same questions as IR papers do: per metric, each system's mean with a 95%
bootstrap interval over questions, and for every pair of systems the mean difference, win/tie/loss,
a paired Fisher randomisation test and a paired t-test (both two-sided), Holm-adjusted p-values
and the minimum detectable difference.

Where each number comes from:
- per-question values: ``qa_core.evaluation`` (ir-measures, trec_eval semantics: MAP, MRR, P@1,
  nDCG@10, raw or clean), so they match trec_eval rather than ranx's own metric code (which breaks
  score ties differently);
- t-test: ranx's ``paired_student_t_test`` (scipy's ``ttest_rel``), as ``ranx.compare`` runs it;
- randomisation test: scipy's ``permutation_test`` with paired sign flips (``permutation_type=
  "samples"``) on the mean difference, seeded, ``PERMUTATIONS`` draws, and exact (every one of the
  2^n flips) when there are no more than that. ranx has this test too, but its numba kernel draws
  from per-thread generators that its ``random_seed`` does not reach, so its p-value changes from
  call to call (AmenRa/ranx#70, measured here too); ``tests/test_significance.py`` checks that both
  agree within 0.01;
- not in ranx, so done here: Holm's step-down adjustment (``holm``; scipy has only BH/BY), the
  bootstrap interval (scipy's ``bootstrap``, percentile method, seeded) and the minimum detectable
  difference (``minimum_detectable_difference``: noncentral t, see there).

Conventions: in a pair the first system (in the order given) is the reference and every delta is
``model - reference``, so a win is a question where the later system scores higher; a question ties
when its delta is within ``TIE_TOLERANCE``. Holm's family is every pair of systems on one metric.
A test that is undefined (fewer than two questions; for the t-test also differences without variance,
every question tied included) has p-value ``None`` and a note saying why.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

from qa_core.evaluation import METRIC_LABELS, METRICS, Qrels, Run, evaluate
from qa_core.types import InputError

PERMUTATIONS = 10_000
RESAMPLES = 10_000
SEED = 42
ALPHA = 0.05
POWER = 0.8
CONFIDENCE = 0.95
TIE_TOLERANCE = 1e-9
T_TEST, RANDOMISATION = "paired t-test", "randomisation"
FORMATS = ("table", "markdown", "latex", "json")


@dataclass(frozen=True)
class Settings:
    permutations: int = PERMUTATIONS
    resamples: int = RESAMPLES
    seed: int = SEED
    alpha: float = ALPHA
    power: float = POWER


@dataclass(frozen=True)
class PairedTest:
    name: str  # T_TEST or RANDOMISATION
    p_value: float | None
    holm_p: float | None = None  # adjusted over every pair of systems on the same metric
    note: str = ""  # why the test is undefined, when it is


@dataclass(frozen=True)
class PairComparison:
    """``model`` against ``reference`` on one metric over the shared questions."""

    metric: str
    reference: str
    model: str
    questions: int
    mean_delta: float
    wins: int  # questions where ``model`` scores higher than ``reference``
    ties: int
    losses: int
    tests: tuple[PairedTest, ...]  # the t-test, then the randomisation test
    mdd: float | None  # minimum detectable difference (metric units), None when undefined

    def test(self, name: str) -> PairedTest:
        return next(test for test in self.tests if test.name == name)

    def verdict(self, alpha: float = ALPHA) -> str:
        """In words, from the Holm-adjusted randomisation p-value and the MDD."""
        p = self.test(RANDOMISATION).holm_p
        words = "undefined" if p is None else ("significant" if p < alpha else "not significant")
        if self.mdd is not None and abs(self.mean_delta) < self.mdd:
            words += "; the difference is below the MDD"
        return words


@dataclass
class Comparison:
    systems: list[str]
    metrics: list[str]
    questions: int
    means: pd.DataFrame  # index system, one column per metric
    ci_low: pd.DataFrame  # same shape: the bootstrap interval's ends (NaN with fewer than 2 questions)
    ci_high: pd.DataFrame
    pairs: list[PairComparison]
    settings: Settings = field(default_factory=Settings)

    def pairs_for(self, metric: str) -> list[PairComparison]:
        return [pair for pair in self.pairs if pair.metric == metric]

    def systems_table(self) -> pd.DataFrame:
        """One row per system: each metric's mean and its interval's ends."""
        table = pd.DataFrame(index=pd.Index(self.systems, name="system"))
        for metric in self.metrics:
            table[metric] = self.means[metric]
            table[f"{metric} CI low"] = self.ci_low[metric]
            table[f"{metric} CI high"] = self.ci_high[metric]
        return table

    def pairs_table(self, metric: str | None = None) -> pd.DataFrame:
        """One row per pair (and metric, unless ``metric`` is given)."""
        rows = []
        for pair in self.pairs if metric is None else self.pairs_for(metric):
            t_test, randomisation = pair.test(T_TEST), pair.test(RANDOMISATION)
            rows.append({
                "metric": pair.metric, "model": pair.model, "vs": pair.reference, "questions": pair.questions,
                "mean Δ": pair.mean_delta, "wins": pair.wins, "ties": pair.ties, "losses": pair.losses,
                "randomisation p": randomisation.p_value, "randomisation p (Holm)": randomisation.holm_p,
                "t-test p": t_test.p_value, "t-test p (Holm)": t_test.holm_p, "MDD": pair.mdd,
                "verdict": pair.verdict(self.settings.alpha),
                "note": "; ".join(f"{test.name}: {test.note}" for test in pair.tests if test.note),
            })
        columns = ["metric", "model", "vs", "questions", "mean Δ", "wins", "ties", "losses", "randomisation p",
                   "randomisation p (Holm)", "t-test p", "t-test p (Holm)", "MDD", "verdict", "note"]
        return pd.DataFrame(rows, columns=columns)

    def describe(self) -> str:
        """What the numbers are, in one sentence (captions, table footers)."""
        s = self.settings
        return (f"{self.questions} questions; 95% percentile bootstrap intervals ({s.resamples:,} resamples); "
                f"paired randomisation test ({s.permutations:,} sign flips, exact when fewer) and paired t-test, "
                f"two-sided, p-values Holm-adjusted over the {len(self.pairs_for(self.metrics[0]))} pair(s) per "
                f"metric; MDD: the difference a paired t-test finds at alpha {s.alpha} with power {s.power}; "
                f"seed {s.seed}.")

    def render(self, fmt: str = "table") -> str:
        """The systems and pairs tables as plain text, markdown, LaTeX or JSON."""
        if fmt == "json":
            return json.dumps(self.to_dict(), indent=2)
        if fmt not in FORMATS:
            raise InputError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
        systems, pairs = self._display_tables()
        if fmt == "markdown":
            parts = [table.to_markdown(index=False, disable_numparse=True) for table in (systems, pairs)]
        elif fmt == "latex":
            parts = [_latex(systems), _latex(pairs)]
        else:
            parts = [systems.to_string(index=False), pairs.to_string(index=False)]
        note = self.describe()
        return "\n\n".join([*parts, f"% {note}" if fmt == "latex" else note]) + "\n"

    def to_dict(self) -> dict:
        systems = {
            name: {metric: {"mean": _number(self.means.at[name, metric]), "ci": [
                _number(self.ci_low.at[name, metric]), _number(self.ci_high.at[name, metric])]}
                for metric in self.metrics}
            for name in self.systems
        }
        pairs = [{key: _number(value) if isinstance(value, float) else value for key, value in row.items()}
                 for row in self.pairs_table().to_dict("records")]
        return {"questions": self.questions, "settings": vars(self.settings), "systems": systems, "pairs": pairs}

    def _display_tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Rounded, with the intervals as ``[low, high]`` text, for the text formats."""
        systems = pd.DataFrame({"system": self.systems})
        for metric in self.metrics:
            label = METRIC_LABELS.get(metric, metric)
            systems[label] = [f"{self.means.at[name, metric]:.4f}" for name in self.systems]
            systems[f"{label} 95% CI"] = [
                _interval(self.ci_low.at[name, metric], self.ci_high.at[name, metric]) for name in self.systems
            ]
        pairs = self.pairs_table().drop(columns=["note"])
        pairs["metric"] = [METRIC_LABELS.get(metric, metric) for metric in pairs["metric"]]
        pairs["W/T/L"] = [f"{w}/{t}/{los}" for w, t, los in zip(pairs["wins"], pairs["ties"], pairs["losses"])]
        pairs = pairs.drop(columns=["wins", "ties", "losses", "questions"])
        pairs["mean Δ"] = [f"{value:+.4f}" for value in pairs["mean Δ"]]
        for column in ("randomisation p", "randomisation p (Holm)", "t-test p", "t-test p (Holm)"):
            pairs[column] = [format_p(value) for value in pairs[column]]
        pairs["MDD"] = ["-" if value is None or pd.isna(value) else f"{value:.4f}" for value in pairs["MDD"]]
        order = ["metric", "model", "vs", "mean Δ", "W/T/L", "randomisation p", "randomisation p (Holm)",
                 "t-test p", "t-test p (Holm)", "MDD", "verdict"]
        return systems, pairs[order]


def format_p(p: float | None) -> str:
    """A p-value as papers print it: ``-`` when undefined, ``< 0.001`` when tiny."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "-"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _number(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _interval(low: float, high: float) -> str:
    return "-" if math.isnan(low) else f"[{low:.4f}, {high:.4f}]"


def _latex(table: pd.DataFrame) -> str:
    # Styler escapes &, %, _ and friends in system names, which DataFrame.to_latex would not.
    return table.style.hide(axis="index").format(escape="latex").format_index(escape="latex", axis=1).to_latex(
        hrules=True
    )


# ---------------------------------------------------------------------- the tests


def win_tie_loss(deltas: Sequence[float], tolerance: float = TIE_TOLERANCE) -> tuple[int, int, int]:
    """Counts of deltas above ``tolerance``, within it, and below ``-tolerance``."""
    values = np.asarray(deltas, dtype=float)
    wins, losses = int((values > tolerance).sum()), int((values < -tolerance).sum())
    return wins, len(values) - wins - losses, losses


def _paired(model: Sequence[float], reference: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(model, dtype=float), np.asarray(reference, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired values need the same questions: {a.shape} and {b.shape}")
    return a, b


def t_test(model: Sequence[float], reference: Sequence[float]) -> PairedTest:
    """Two-sided paired t-test through ranx (scipy's ``ttest_rel``); undefined cases give ``None``
    with a note instead of scipy's NaN and warnings."""
    from ranx.statistical_tests import paired_student_t_test  # ranx takes seconds to import

    a, b = _paired(model, reference)
    differences = a - b
    if len(differences) < 2:
        return PairedTest(T_TEST, None, note="needs two or more questions")
    if not (np.abs(differences) > TIE_TOLERANCE).any():
        return PairedTest(T_TEST, None, note="every question ties")
    # Equal differences up to rounding make scipy return an absurd t (1e16) instead of NaN.
    if float(np.ptp(differences)) <= TIE_TOLERANCE:
        return PairedTest(T_TEST, None, note="the differences have no variance")
    p_value, _ = paired_student_t_test(b, a)
    return PairedTest(T_TEST, float(p_value))


def randomisation_test(
    model: Sequence[float], reference: Sequence[float], permutations: int = PERMUTATIONS, seed: int = SEED
) -> PairedTest:
    """Paired Fisher randomisation test of the mean difference, two-sided: each question's pair of
    values is swapped at random (``permutations`` seeded draws). Tied questions are left out first:
    swapping them changes nothing, so the p-value is the same, and the test is exact (all 2^k swaps
    of the k untied questions) whenever 2^k <= ``permutations``. scipy's ``permutation_test``; see
    the module docstring for why not ranx's."""
    from scipy.stats import permutation_test

    a, b = _paired(model, reference)
    if len(a) < 2:
        return PairedTest(RANDOMISATION, None, note="needs two or more questions")
    untied = np.abs(a - b) > TIE_TOLERANCE
    if untied.sum() < 2:  # every swap gives the same |mean difference|
        return PairedTest(RANDOMISATION, 1.0)
    result = permutation_test(
        (a[untied], b[untied]), _mean_difference, permutation_type="samples", vectorized=True,
        n_resamples=permutations, alternative="two-sided", rng=np.random.default_rng(seed),
    )
    return PairedTest(RANDOMISATION, float(result.pvalue))


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    return np.mean(x - y, axis=axis)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of a family of p-values (``None`` entries are left out of the
    family and stay ``None``): the i-th smallest of m is multiplied by m - i + 1, adjusted values
    never decrease in that order, and are capped at 1. Written here because neither ranx nor scipy
    has it (scipy's ``false_discovery_control`` is Benjamini-Hochberg/Yekutieli)."""
    defined = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(defined):
        running = max(running, min(1.0, (len(defined) - rank) * p))
        adjusted[index] = running
    return adjusted


def bootstrap_interval(
    values: Sequence[float], resamples: int = RESAMPLES, seed: int = SEED, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over questions (scipy's ``bootstrap``, seeded);
    NaNs with fewer than two questions. Percentile rather than BCa: BCa is undefined when every
    question has the same value (a P@1 of 1.0 on a small split)."""
    from scipy.stats import bootstrap

    data = np.asarray(values, dtype=float)
    if len(data) < 2:
        return math.nan, math.nan
    if float(np.ptp(data)) == 0.0:
        return float(data[0]), float(data[0])
    result = bootstrap(
        (data,), np.mean, n_resamples=resamples, confidence_level=confidence, method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def minimum_detectable_difference(
    differences: Sequence[float], alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """The smallest true mean difference a two-sided paired t-test at ``alpha`` detects with
    probability ``power``, given the per-question differences' standard deviation s and count n: the
    delta where the noncentral t (df n - 1, noncentrality delta * sqrt(n) / s) exceeds the critical
    value with that probability (about 2.8 s / sqrt(n) for large n). The randomisation test's power
    is close to the t-test's on these sample sizes. ``None`` with fewer than two questions; 0 when
    the differences do not vary. Hand-written: ranx has no power analysis, and statsmodels'
    ``TTestPower`` is the same three lines of scipy."""
    from scipy.optimize import brentq
    from scipy.stats import nct
    from scipy.stats import t as student_t

    data = np.asarray(differences, dtype=float)
    n = len(data)
    if n < 2:
        return None
    sd = float(np.std(data, ddof=1))
    if sd <= TIE_TOLERANCE:
        return 0.0
    df, critical = n - 1, float(student_t.ppf(1 - alpha / 2, n - 1))

    def shortfall(delta: float) -> float:
        noncentrality = delta * math.sqrt(n) / sd
        # The wrong-direction tail is < 1e-14 where scipy's nct underflows to NaN: count it as 0.
        wrong_way = float(np.nan_to_num(nct.cdf(-critical, df, noncentrality)))
        return float(nct.sf(critical, df, noncentrality)) + wrong_way - power

    upper = 4 * sd / math.sqrt(n)  # about 3 s / sqrt(n) for large n; small n need more
    while shortfall(upper) < 0:
        upper *= 2
    return float(brentq(shortfall, 0.0, upper, xtol=1e-10))


# ---------------------------------------------------------------------- comparing systems


def per_query(runs: Mapping[str, Run], qrels: Qrels, clean: bool = False) -> dict[str, pd.DataFrame]:
    """Each run's per-question metrics (``qa_core.evaluation``: qid x metric), same questions for all."""
    return {name: evaluate(run, qrels, clean=clean).per_query for name, run in runs.items()}


def average_over_seeds(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Per-question metrics averaged over several runs of one model (one per seed), so that a model
    compares as its expected behaviour over training seeds rather than as one lucky or unlucky seed.
    The test then treats the seeds' mean per question as fixed: with few seeds it understates the
    seeds' own variance."""
    if not frames:
        raise InputError("no runs to average")
    index = frames[0].index
    if any(not frame.index.equals(index) for frame in frames[1:]):
        raise InputError("the seed runs were not evaluated on the same questions")
    return sum(frames[1:], frames[0].copy()) / len(frames)


def compare_runs(
    runs: Mapping[str, Run], qrels: Qrels, metrics: Sequence[str] = METRICS, clean: bool = False,
    settings: Settings | None = None,
) -> Comparison:
    """Evaluate every run against ``qrels`` and compare them (``compare_values``)."""
    return compare_values(per_query(runs, qrels, clean), metrics, settings)


def compare_values(
    values: Mapping[str, pd.DataFrame], metrics: Sequence[str] = METRICS, settings: Settings | None = None
) -> Comparison:
    """Compare systems from their per-question values (system -> qid x metric frames, the same
    questions in each; the first system is every pair's reference for the later ones)."""
    settings = settings or Settings()
    systems = list(values)
    if len(systems) < 2:
        raise InputError(f"compare needs two or more runs, got {len(systems)}")
    unknown = [metric for metric in metrics if metric not in METRICS]
    if unknown or not metrics:
        raise InputError(f"unknown metric {', '.join(map(repr, unknown)) or '(none)'}; choose from {', '.join(METRICS)}")
    qids = values[systems[0]].index
    for name in systems[1:]:
        if set(values[name].index) != set(qids):
            raise InputError(f"{systems[0]!r} and {name!r} were not evaluated on the same questions")
    if len(qids) == 0:
        raise InputError("there are no questions to compare on")
    table = {name: values[name].loc[qids] for name in systems}
    means = pd.DataFrame({metric: [float(table[name][metric].mean()) for name in systems] for metric in metrics},
                         index=pd.Index(systems, name="system"))
    intervals = {
        (name, metric): bootstrap_interval(table[name][metric].to_numpy(), settings.resamples, settings.seed)
        for name in systems for metric in metrics
    }
    ci_low = pd.DataFrame({m: [intervals[(name, m)][0] for name in systems] for m in metrics}, index=means.index)
    ci_high = pd.DataFrame({m: [intervals[(name, m)][1] for name in systems] for m in metrics}, index=means.index)
    pairs = []
    for metric in metrics:
        pairs += _pairs_on(metric, {name: table[name][metric].to_numpy() for name in systems}, settings)
    return Comparison(systems, list(metrics), len(qids), means, ci_low, ci_high, pairs, settings)


def _pairs_on(metric: str, values: Mapping[str, np.ndarray], settings: Settings) -> list[PairComparison]:
    """Every pair of systems on one metric, with the Holm adjustment over those pairs."""
    raw = []
    for reference, model in combinations(values, 2):
        a, b = values[model], values[reference]
        deltas = a - b
        tests = (t_test(a, b), randomisation_test(a, b, settings.permutations, settings.seed))
        mdd = minimum_detectable_difference(deltas, settings.alpha, settings.power)
        raw.append((reference, model, deltas, win_tie_loss(deltas), tests, mdd))
    adjusted = {
        name: holm([tests[index].p_value for *_, tests, _ in raw]) for index, name in enumerate((T_TEST, RANDOMISATION))
    }
    pairs = []
    for row, (reference, model, deltas, (wins, ties, losses), tests, mdd) in enumerate(raw):
        pairs.append(PairComparison(
            metric, reference, model, len(deltas), float(deltas.mean()), wins, ties, losses,
            tuple(PairedTest(test.name, test.p_value, adjusted[test.name][row], test.note) for test in tests), mdd,
        ))
    return pairs

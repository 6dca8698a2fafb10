"""qa_core.significance: the randomisation test against a p-value counted by hand, Holm on the textbook
example, the minimum detectable difference against published power tables, and agreement with ranx's
``compare`` (means, t-test, randomisation test) on runs without score ties."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from qa_core import significance
from qa_core.fusion import RANX_ID_WIDTH
from qa_core.types import InputError

# ---------------------------------------------------------------------- a pair counted by hand
# Six questions, four candidates each, one relevant ("r"); a system that puts it at rank k has AP 1/k.
# A puts it at ranks 1, 1, 1, 1, 1, 4 and B at 2, 2, 4, 2, 2, 2: AP differences A - B are
# +1/2, +1/2, +3/4, +1/2, +1/2, -1/4 (sum 2.5; every value exact in binary floating point).
# Under the null each difference keeps or flips its sign: 2^6 = 64 equally likely outcomes. |sum| >= 2.5
# needs the flipped subset to sum to <= 0 or >= 2.5: {}, {-1/4}, and their complements. p = 4/64.
RANKS_A, RANKS_B = [1, 1, 1, 1, 1, 4], [2, 2, 4, 2, 2, 2]
EXACT_P = 4 / 64


def run_with_relevant_at(ranks: list[int]) -> dict[str, dict[str, float]]:
    run = {}
    for i, rank in enumerate(ranks):
        others = iter(["n1", "n2", "n3"])
        run[f"q{i}"] = {("r" if position == rank else next(others)): float(10 - position) for position in range(1, 5)}
    return run


QRELS = {f"q{i}": {"r": 1, "n1": 0, "n2": 0, "n3": 0} for i in range(len(RANKS_A))}
RUN_A, RUN_B = run_with_relevant_at(RANKS_A), run_with_relevant_at(RANKS_B)


@pytest.fixture(scope="module")
def hand_built() -> significance.Comparison:
    return significance.compare_runs({"B": RUN_B, "A": RUN_A}, QRELS, metrics=["map", "p@1"])


def test_randomisation_test_is_exact_on_a_small_pair(hand_built):
    (pair,) = hand_built.pairs_for("map")
    assert (pair.reference, pair.model) == ("B", "A")
    assert pair.mean_delta == pytest.approx(2.5 / 6)
    assert (pair.wins, pair.ties, pair.losses) == (5, 0, 1)
    assert pair.test(significance.RANDOMISATION).p_value == pytest.approx(EXACT_P, abs=1e-12)
    # Exact means seed-free: any seed, any number of draws above 2^6, the same p.
    other_seed = significance.randomisation_test([1, 1, 1, 1, 1, 0.25], [0.5, 0.5, 0.25, 0.5, 0.5, 0.5], seed=7)
    assert other_seed.p_value == pytest.approx(EXACT_P, abs=1e-12)
    # Tied questions change nothing: P@1 differs on 5 questions (+1 each), the sixth ties (0 - 0).
    # Only "all kept" and "all flipped" reach |sum| = 5: p = 2 / 2^5.
    (p_at_1,) = hand_built.pairs_for("p@1")
    assert (p_at_1.wins, p_at_1.ties, p_at_1.losses) == (5, 1, 0)
    assert p_at_1.test(significance.RANDOMISATION).p_value == pytest.approx(2 / 32, abs=1e-12)


def test_monte_carlo_randomisation_is_seeded_and_close_to_exact():
    rng = np.random.default_rng(3)
    a, b = rng.random(40), rng.random(40)
    first = significance.randomisation_test(a, b, permutations=10_000, seed=1)
    assert significance.randomisation_test(a, b, permutations=10_000, seed=1) == first  # reproducible
    assert significance.randomisation_test(a, b, permutations=10_000, seed=2).p_value != first.p_value
    # Against the exact answer on a case small enough to enumerate with 13 questions (8,192 swaps):
    small_a, small_b = rng.random(13), rng.random(13)
    exact = significance.randomisation_test(small_a, small_b, permutations=10_000).p_value
    signs = np.array(np.meshgrid(*[[1, -1]] * 13)).reshape(13, -1).T
    differences = small_a - small_b
    by_hand = np.mean(np.abs(signs @ differences) >= abs(differences.sum()) - 1e-12)
    assert exact == pytest.approx(by_hand, abs=1e-12)


def test_undefined_tests_say_why():
    tied = significance.compare_values(
        {"x": pd.DataFrame({"map": [0.5, 1.0]}, index=["q1", "q2"]),
         "y": pd.DataFrame({"map": [0.5, 1.0]}, index=["q1", "q2"])}, metrics=["map"])
    (pair,) = tied.pairs
    assert pair.test(significance.T_TEST).p_value is None and pair.test(significance.T_TEST).note == "every question ties"
    assert pair.test(significance.RANDOMISATION).p_value == 1.0
    assert pair.mdd == 0.0 and pair.verdict() == "not significant"
    constant = significance.t_test([1.0, 0.5, 0.7], [0.5, 0.0, 0.2])  # every difference +0.5
    assert constant.p_value is None and "variance" in constant.note
    single = significance.randomisation_test([1.0], [0.5])
    assert single.p_value is None and "two or more" in single.note
    assert significance.minimum_detectable_difference([0.3]) is None


# ---------------------------------------------------------------------- Holm


def test_holm_on_the_textbook_example():
    # Holm (1979) as in every textbook: p = 0.01, 0.04, 0.03, 0.005 (m = 4). Sorted: 0.005 x 4 = 0.02,
    # 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> 0.06 (adjusted values never decrease).
    # At alpha 0.05 the first two are rejected, as the textbook says.
    assert significance.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert significance.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert significance.holm([0.2, None, 0.01]) == pytest.approx([0.2, None, 0.02])  # None stays out
    assert significance.holm([]) == []


def test_holm_family_is_every_pair_on_a_metric():
    rng = np.random.default_rng(5)
    base = rng.random(30)
    values = {name: pd.DataFrame({"map": np.clip(base + rng.normal(shift, 0.1, 30), 0, 1)}, index=range(30))
              for name, shift in (("a", 0.0), ("b", 0.05), ("c", 0.1))}
    comparison = significance.compare_values(values, metrics=["map"], settings=significance.Settings(permutations=2000))
    assert [(p.reference, p.model) for p in comparison.pairs] == [("a", "b"), ("a", "c"), ("b", "c")]
    for name in (significance.T_TEST, significance.RANDOMISATION):
        raw = [pair.test(name).p_value for pair in comparison.pairs]
        assert [pair.test(name).holm_p for pair in comparison.pairs] == pytest.approx(significance.holm(raw))


# ---------------------------------------------------------------------- intervals and power


def test_bootstrap_interval_is_seeded_and_covers_the_mean():
    values = np.random.default_rng(0).random(200)
    low, high = significance.bootstrap_interval(values, seed=1)
    assert low < values.mean() < high
    assert (low, high) == significance.bootstrap_interval(values, seed=1)
    # The percentile interval of a mean over 200 uniform values: about mean +- 1.96 * 0.289 / sqrt(200).
    assert high - low == pytest.approx(2 * 1.96 * values.std(ddof=1) / np.sqrt(200), rel=0.1)
    assert significance.bootstrap_interval([1.0, 1.0, 1.0]) == (1.0, 1.0)


def test_minimum_detectable_difference_matches_power_tables():
    # Differences with standard deviation 1: the MDD is the standardised effect size. Two-sided paired
    # t-test, alpha 0.05, power 0.8: d = 0.9958 at n = 10 (G*Power); d = 0.5 needs n = 34 and d = 0.8
    # needs n = 15 (Cohen 1988's one-sample tables), so the MDD crosses them between n - 1 and n.
    def standardised(n: int) -> np.ndarray:
        differences = np.random.default_rng(n).normal(size=n)
        return (differences - differences.mean()) / differences.std(ddof=1)

    assert significance.minimum_detectable_difference(standardised(10)) == pytest.approx(0.9958, abs=2e-3)
    for effect, n in ((0.5, 34), (0.8, 15)):
        assert significance.minimum_detectable_difference(standardised(n)) < effect
        assert significance.minimum_detectable_difference(standardised(n - 1)) > effect
    # Large n: (z_0.975 + z_0.8) * s / sqrt(n) = 2.8016 s / sqrt(n).
    big = np.random.default_rng(1).normal(0.0, 0.2, 5000)
    assert significance.minimum_detectable_difference(big) == pytest.approx(
        2.8016 * big.std(ddof=1) / np.sqrt(5000), rel=2e-3)
    assert significance.minimum_detectable_difference([0.1, 0.1, 0.1]) == 0.0


# ---------------------------------------------------------------------- agreement with ranx


def tie_free_runs() -> tuple[dict, dict, dict]:
    """40 questions, 8 candidates with grades 0-2, continuous scores (no ties): ranx's metric code and
    trec_eval's agree there, so ranx's p-values are for the same per-question values."""
    rng = np.random.default_rng(7)
    qrels, control, treatment = {}, {}, {}
    for i in range(40):
        grades = ((rng.random(8) < 0.3) * rng.integers(1, 3, 8)).astype(int)
        grades[0] = max(grades[0], 1)
        docs = [f"d{j}" for j in range(8)]
        qrels[f"q{i}"] = dict(zip(docs, grades.tolist()))
        control[f"q{i}"] = dict(zip(docs, (rng.random(8) + 0.3 * grades).tolist()))
        treatment[f"q{i}"] = dict(zip(docs, (rng.random(8) + 0.8 * grades).tolist()))
    return qrels, control, treatment


RANX_METRICS = {"map": "map", "mrr": "mrr", "p@1": "precision@1", "ndcg@10": "ndcg@10"}


def fusion_width(table: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """``table`` with its doc ids right-aligned to the width ``qa_core.fusion`` gives ranx, in the same
    order. numba compiles ranx's functions for each width of doc id; at this one, ranx reuses what the
    fusion tests compiled (from an empty cache, after them: 11 s for this test instead of 25 s)."""
    return {qid: {f"{doc:>{RANX_ID_WIDTH}}": value for doc, value in docs.items()} for qid, docs in table.items()}


@pytest.mark.parametrize("case", ["hand-built", "forty questions"])
def test_agrees_with_ranx_compare(case):
    from ranx import Qrels, Run, compare

    qrels, control, treatment = (QRELS, RUN_B, RUN_A) if case == "hand-built" else tie_free_runs()
    ours = significance.compare_runs({"control": control, "treatment": treatment}, qrels)
    runs = [Run(fusion_width(control), name="control"), Run(fusion_width(treatment), name="treatment")]
    metrics, judged = list(RANX_METRICS.values()), Qrels(fusion_width(qrels))
    student = compare(judged, runs, metrics=metrics, stat_test="student")
    fisher = compare(judged, runs, metrics=metrics, stat_test="fisher", n_permutations=10_000)
    pair = frozenset(["control", "treatment"])
    for metric, theirs in RANX_METRICS.items():
        for system in ("control", "treatment"):
            assert ours.means.at[system, metric] == pytest.approx(student.results[system][theirs], abs=1e-9)
        (result,) = ours.pairs_for(metric)
        t_test, randomisation = result.test(significance.T_TEST), result.test(significance.RANDOMISATION)
        if t_test.p_value is None:  # ranx gives NaN where the t-test is undefined
            assert np.isnan(student.comparisons[pair][theirs]["p_value"])
        else:
            assert t_test.p_value == pytest.approx(student.comparisons[pair][theirs]["p_value"], abs=1e-6)
        # ranx draws 10,000 unseeded permutations (AmenRa/ranx#70): its p-value has a standard error of
        # at most 0.0025 at these p-values (all below 0.07), so 0.01 is four standard errors.
        assert randomisation.p_value == pytest.approx(fisher.comparisons[pair][theirs]["p_value"], abs=0.01)
        # ranx's win/tie/loss is the control's; ours is the later system's.
        wtl = student.win_tie_loss[("control", "treatment")][theirs]
        assert (result.wins, result.ties, result.losses) == (wtl["L"], wtl["T"], wtl["W"])


# ---------------------------------------------------------------------- tables and bad input


def test_renders_every_format(hand_built):
    text = hand_built.render("table")
    assert "randomisation p (Holm)" in text and "0.062" in text and "6 questions" in text
    markdown = hand_built.render("markdown")
    assert markdown.splitlines()[0].startswith("| system") and "| MAP" in markdown
    latex = hand_built.render("latex")
    assert latex.count("\\begin{tabular}") == 2 and "95\\% CI" in latex
    record = json.loads(hand_built.render("json"))
    assert record["questions"] == 6 and record["settings"]["permutations"] == 10_000
    (pair,) = [p for p in record["pairs"] if p["metric"] == "map"]
    assert pair["randomisation p"] == pytest.approx(EXACT_P) and pair["model"] == "A" and pair["vs"] == "B"
    assert record["systems"]["A"]["map"]["mean"] == pytest.approx((5 + 0.25) / 6)
    with pytest.raises(InputError, match="format"):
        hand_built.render("html")


def test_latex_escapes_system_names():
    values = {name: pd.DataFrame({"map": [0.1, 0.5, 0.9]}, index=["a", "b", "c"]) for name in ("x_1 & co", "50%")}
    latex = significance.compare_values(values, metrics=["map"]).render("latex")
    assert "x\\_1 \\& co" in latex and "50\\%" in latex


def test_bad_input_is_an_input_error():
    frame = pd.DataFrame({"map": [0.5, 1.0]}, index=["q1", "q2"])
    with pytest.raises(InputError, match="two or more"):
        significance.compare_values({"only": frame})
    with pytest.raises(InputError, match="metric"):
        significance.compare_values({"a": frame, "b": frame}, metrics=["bleu"])
    other = pd.DataFrame({"map": [0.5, 1.0]}, index=["q1", "q3"])
    with pytest.raises(InputError, match="same questions"):
        significance.compare_values({"a": frame, "b": other}, metrics=["map"])


def test_average_over_seeds():
    first = pd.DataFrame({"map": [1.0, 0.0]}, index=["q1", "q2"])
    second = pd.DataFrame({"map": [0.5, 0.5]}, index=["q1", "q2"])
    assert significance.average_over_seeds([first, second])["map"].tolist() == [0.75, 0.25]
    with pytest.raises(InputError, match="same questions"):
        significance.average_over_seeds([first, second.set_axis(["q1", "q9"])])

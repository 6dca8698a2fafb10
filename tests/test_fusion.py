"""Score-level fusion through ranx: per-question z-normalisation, weighted sums, RRF, CombMNZ, member
selection and parameters chosen on DEV."""

from __future__ import annotations

import math

import pytest

from qa_core.fusion import fuse, rank_members, select_members, znorm
from qa_core.types import InputError

QRELS = {"q1": {"a": 1, "b": 0, "c": 0}, "q2": {"d": 1, "e": 0, "f": 0}}
# A ranks q1 right and q2 half right; B the opposite; each has DEV MAP 0.75, together 1.0.
RUN_A = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"d": 2.0, "e": 3.0, "f": 1.0}}
RUN_B = {"q1": {"a": 250.0, "b": 300.0, "c": 100.0}, "q2": {"d": 300.0, "e": 100.0, "f": 200.0}}
CONSTANT = {"q1": {"a": 7.0, "b": 7.0, "c": 7.0}, "q2": {"d": 7.0, "e": 7.0, "f": 7.0}}


def test_znorm_by_hand():
    z = znorm({"q": {"x": 1.0, "y": 2.0, "z": 3.0}, "flat": {"u": 5.0, "v": 5.0}})
    s = math.sqrt(2 / 3)  # population std of 1, 2, 3
    assert z["q"] == pytest.approx({"x": -1 / s, "y": 0.0, "z": 1 / s})
    assert z["flat"] == {"u": 0.0, "v": 0.0}


def test_fuse_is_scale_free_and_weighted():
    scaled = {q: {d: 1000 * s - 5 for d, s in docs.items()} for q, docs in RUN_A.items()}
    assert fuse({"a": scaled}, {"a": 1.0})["q1"] == pytest.approx(znorm(RUN_A)["q1"])
    both = fuse({"a": RUN_A, "b": RUN_B}, {"a": 1.0, "b": 0.5})
    expected = znorm(RUN_A)["q2"]["d"] + 0.5 * znorm(RUN_B)["q2"]["d"]
    assert both["q2"]["d"] == pytest.approx(expected)


def test_fuse_refuses_runs_over_different_pools():
    other = {"q1": {"a": 1.0, "b": 0.0}, "q2": RUN_A["q2"]}
    with pytest.raises(InputError, match="do not score the same"):
        fuse({"a": RUN_A, "other": other}, {"a": 1.0, "other": 1.0})
    with pytest.raises(InputError, match="at least one member"):
        fuse({"a": RUN_A}, {"a": 0.0})


def test_selection_adds_the_complementary_run_and_not_the_useless_one():
    weights, dev_map = select_members({"A": RUN_A, "B": RUN_B, "C": CONSTANT}, QRELS)
    assert set(weights) == {"A", "B"}
    assert dev_map == pytest.approx(1.0)
    single, single_map = select_members({"A": RUN_A, "C": CONSTANT}, QRELS)
    assert single == {"A": 1.0} and single_map == pytest.approx(0.75)


def test_a_misleading_run_is_left_out_and_members_are_ranked_by_dev_map():
    qrels = {f"q{i}": {"good": 1, "bad1": 0, "bad2": 0} for i in range(6)}
    right = {qid: {"good": 3.0, "bad1": 2.0, "bad2": 1.0} for qid in qrels}
    reversed_ = {qid: {doc: -score for doc, score in docs.items()} for qid, docs in right.items()}
    assert rank_members({"wrong": reversed_, "right": right}, qrels) == ["right", "wrong"]
    weights, dev_map = select_members({"right": right, "wrong": reversed_}, qrels)
    assert weights == {"right": 1.0} and dev_map == pytest.approx(1.0)


# ---------------------------------------------------------------------- ranx fusions tuned on DEV


def test_rrf_and_combmnz_by_hand():
    from qa_core.fusion import Fusion, apply_fusion

    # RRF with k = 60: q1 ranks a, b, c under A and b, a, c under B -> a and b both 1/61 + 1/62.
    rrf = apply_fusion(Fusion("rrf", ("A", "B"), {"k": 60}), {"A": RUN_A, "B": RUN_B})
    assert rrf["q1"]["a"] == pytest.approx(1 / 61 + 1 / 62) and rrf["q1"]["c"] == pytest.approx(2 / 63)
    # CombMNZ on min-max scores: q1 A gives a 1, b 0.5, c 0; B gives b 1, a 0.75, c 0; both runs have
    # every candidate, so each sum is doubled.
    mnz = apply_fusion(Fusion("combmnz", ("A", "B")), {"A": RUN_A, "B": RUN_B})
    assert mnz["q1"] == pytest.approx({"a": 2 * 1.75, "b": 2 * 1.5, "c": 0.0})


def test_weighted_sum_is_tuned_on_dev_and_keeps_the_tag():
    from qa_core.fusion import apply_fusion, tune_fusion

    recipe = tune_fusion("wsum-zscore", {"A": RUN_A, "B": RUN_B}, QRELS)
    weights = recipe.params["weights"]
    assert sum(weights) == pytest.approx(1.0) and 0 < weights[0] < 1  # both members are needed
    assert recipe.dev_map == pytest.approx(1.0)  # each alone has 0.75
    assert recipe.tag == "fusion:wsum-zscore(A+B)"
    fused = apply_fusion(recipe, {"A": RUN_A, "B": RUN_B})
    by_hand = fuse({"A": RUN_A, "B": RUN_B}, dict(zip("AB", weights)))
    assert all(fused[qid] == pytest.approx(by_hand[qid]) for qid in QRELS)
    assert tune_fusion("rrf", {"A": RUN_A, "B": RUN_B}, QRELS).params["k"] in range(10, 101, 10)


def test_tuning_refuses_what_it_cannot_tune():
    from qa_core.fusion import tune_fusion

    with pytest.raises(InputError, match="unknown fusion"):
        tune_fusion("borda", {"A": RUN_A, "B": RUN_B}, QRELS)
    with pytest.raises(InputError, match="two or more"):
        tune_fusion("rrf", {"A": RUN_A}, QRELS)
    unjudged = {qid: dict.fromkeys(grades, 0) for qid, grades in QRELS.items()}
    with pytest.raises(InputError, match="relevant candidate"):
        tune_fusion("wsum-minmax", {"A": RUN_A, "B": RUN_B}, unjudged)

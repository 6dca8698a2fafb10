"""The learning loop (qa_core.services.labeling.curves): the simulated annotator on the demo corpus improves
on its seed model, writes its labels through the store, and the queue strategies it uses are
deterministic under a seed; curve summaries and the registry curve."""

from __future__ import annotations

from pathlib import Path

import pytest

from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.rankers import registry
from qa_core.services.labeling import training_labels
from qa_core.services.labeling.curves import (
    ANNOTATOR,
    CurvePoint,
    curve_figure,
    curve_summary,
    labels_to_reach,
    pick_round,
    seed_order,
    simulate_loop,
)
from qa_core.services.labeling.strategies import STRATEGIES, model_scores
from qa_core.types import InputError

FAST = {"max_epochs": 8, "patience": 3}


@pytest.fixture
def demo_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    store = Store(f"sqlite:///{tmp_path / 'store.sqlite'}")
    store.datasets.import_dataset(load_demo())
    yield store
    store.close()


@pytest.fixture
def committee(demo_store: Store) -> dict[str, dict[int, float]]:
    return {"bm25": model_scores(registry.create("bm25"), demo_store.datasets.candidate_rows("demo", split="train"))}


def test_loop_improves_on_the_seed_model_through_the_store(demo_store: Store, committee) -> None:
    points = simulate_loop(demo_store, "demo", "uncertainty", [12, 60], seed=1, committee=committee, model_config=FAST)
    assert [p.labels for p in points] == [12, 60]
    seed_model, final = points[0], points[-1]
    assert final.dev_map > seed_model.dev_map and final.test_map > seed_model.test_map
    # The labels went into the store as the simulated annotator's, each the pair's gold grade,
    # and the training rule reads them back (TRAIN only: dev/test gold stays out of the store).
    train = demo_store.datasets.candidate_rows("demo", split="train")
    gold = {r.candidate_id: r.gold_label for r in train}
    current = demo_store.labels.current_labels("demo")
    assert len(current) == 60 and set(current) <= set(gold)
    assert all(grades == {ANNOTATOR: gold[candidate_id]} for candidate_id, grades in current.items())
    assert training_labels(demo_store, "demo").counts() == {"adjudicated": 0, "labels": 60, "preferences": 0, "gold": 0}


def test_seed_set_is_whole_questions_and_shared_by_every_strategy(demo_store: Store) -> None:
    records = demo_store.datasets.candidate_rows("demo", split="train")
    order = seed_order(records, seed=3)
    assert sorted(order) == sorted(r.candidate_id for r in records) and order == seed_order(records, seed=3)
    qid_of = {r.candidate_id: r.qid for r in records}
    questions = [qid_of[c] for c in order]
    runs = [q for i, q in enumerate(questions) if i == 0 or q != questions[i - 1]]
    assert len(runs) == len(set(runs)), "each question's pairs come together"
    assert order != seed_order(records, seed=4)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_strategies_pick_deterministically_under_a_seed(demo_store: Store, committee, strategy: str) -> None:
    records = demo_store.datasets.candidate_rows("demo", split="train")
    # A fixed "current model" score: the overlap baseline (no training needed).
    scores = {"current": model_scores(registry.create("overlap"), records), **committee}
    wanted = {"uncertainty": {"current": scores["current"]}, "disagreement": scores, "pool": scores}.get(strategy, {})
    first = pick_round(strategy, records, 20, seed=7, scores=wanted)
    assert len(first) == len(set(first)) == 20
    assert first == pick_round(strategy, records, 20, seed=7, scores=wanted)
    if strategy in ("random", "diversity"):
        assert first != pick_round(strategy, records, 20, seed=8, scores=wanted)
    if strategy == "diversity":  # 20 pairs from 20 different questions (the demo has 139)
        qid_of = {r.candidate_id: r.qid for r in records}
        assert len({qid_of[c] for c in first}) == 20


def test_disagreement_without_a_committee_is_a_clear_error(demo_store: Store) -> None:
    with pytest.raises(InputError, match="committee"):
        simulate_loop(demo_store, "demo", "disagreement", [12, 30], seed=1, model_config={"max_epochs": 1})


@pytest.mark.parametrize("budgets", [[], [30, 12], [0, 5], [12, 10_000]])
def test_bad_budgets_are_refused(demo_store: Store, budgets: list[int]) -> None:
    with pytest.raises(InputError):
        simulate_loop(demo_store, "demo", "random", budgets)


def test_curve_summary_and_labels_to_reach() -> None:
    curves = [
        [CurvePoint(100, 0.5, 0.4, 1.0), CurvePoint(200, 0.7, 0.6, 1.0)],
        [CurvePoint(100, 0.7, 0.6, 1.0), CurvePoint(200, 0.9, 0.8, 1.0)],
    ]
    summary = curve_summary(curves, "dev_map")
    assert [row["labels"] for row in summary] == [100, 200]
    assert summary[0]["mean"] == pytest.approx(0.6) and summary[0]["std"] == pytest.approx(0.1414, abs=1e-4)
    assert labels_to_reach(summary, 0.6) == 100
    assert labels_to_reach(summary, 0.75) == 200
    assert labels_to_reach(summary, 0.81) is None
    figure = curve_figure({"random": summary}, references={"full data": 0.8})
    assert list(figure.data[0].x) == [100, 200]



"""The stacker: out-of-fold scores never come from a member that saw the question, the stacker's
fit never reads DEV or TEST labels, features line up with the pools (real LightGBM, real spaCy)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pytest

from qa_core.data.demo import load_demo
from qa_core.evaluation import run_from_scores
from qa_core.rankers import registry
from qa_core.rankers.base import CandidateInput, Explanation, Pool, Ranker, as_candidates
from qa_core.stacking import (
    LEXICAL_FEATURES,
    Stacker,
    StackerParams,
    feature_table,
    out_of_fold_run,
    question_folds,
    select_stacker,
)
from qa_core.text.features import IdfTable
from qa_core.types import InputError, Question


class Memoriser(Ranker):
    """Scores a pair by the label it was trained on (0 for pairs it never saw): the perfect cheat.
    Records the questions of every fit."""

    name = "memoriser"
    title = "a test's label memoriser"
    fits: list[set[str]] = []

    def __init__(self):
        super().__init__()
        self.labels: dict[tuple[str, str], float] = {}

    def fit(self, train, dev, *, seed=1, analyzer=None, progress=True, callback=None):
        Memoriser.fits.append({q.qid for q in train})
        self.labels = {(q.text, c.text): float(c.label or 0) for q in train for c in q.candidates}
        return {}

    def score_pools(self, pools: Sequence[Pool]) -> list[np.ndarray]:
        return [
            np.array([self.labels.get((question, c.text), 0.0) for c in as_candidates(candidates)])
            for question, candidates in pools
        ]

    def explain(self, question: str, candidates: Sequence[CandidateInput], index: int) -> Explanation:
        raise NotImplementedError


def _fit_member(name: str):
    def train(train: Sequence[Question], dev: Sequence[Question], seed: int) -> Ranker:
        ranker = Memoriser() if name == "memoriser" else registry.create(name)
        if name != "bm25":  # BM25 reads no training data (its index is built from the pool it scores)
            ranker.fit(train, dev, seed=seed, progress=False)
        return ranker

    return train


@pytest.fixture(scope="module")
def splits():
    dataset = load_demo()
    return dataset.split("train"), dataset.split("dev"), dataset.split("test")


def _flipped(questions: Sequence[Question]) -> list[Question]:
    """The same pools with every label inverted (relevant <-> not)."""
    return [
        dataclasses.replace(q, candidates=[dataclasses.replace(c, label=1 - int(c.label or 0)) for c in q.candidates])
        for q in questions
    ]


def _member_runs(train, dev, test) -> tuple[dict, dict, dict]:
    """Out-of-fold TRAIN runs and full-TRAIN DEV/TEST runs of the overlap and BM25 baselines."""
    train_runs, dev_runs, test_runs = {}, {}, {}
    for name in ("overlap", "bm25"):
        train_runs[name] = out_of_fold_run(_fit_member(name), train, dev, folds=3)
        full = _fit_member(name)(train, dev, 1)
        for runs, questions in ((dev_runs, dev), (test_runs, test)):
            runs[name] = run_from_scores(questions, full.score_pools([(q.text, q.candidates) for q in questions]))
    return train_runs, dev_runs, test_runs


def test_folds_partition_the_questions_reproducibly(splits):
    train = splits[0]
    folds = question_folds(train, 4, seed=3)
    assert sorted(q.qid for fold in folds for q in fold) == sorted(q.qid for q in train)
    assert {len(fold) for fold in folds} <= {len(train) // 4, len(train) // 4 + 1}  # as even as 139 questions allow
    assert [[q.qid for q in f] for f in question_folds(train, 4, seed=3)] == [[q.qid for q in f] for f in folds]
    with pytest.raises(InputError, match="folds"):
        question_folds(train, 1, seed=3)


def test_out_of_fold_scores_never_come_from_a_member_that_saw_the_question(splits):
    train, dev, test = splits
    Memoriser.fits.clear()
    run = out_of_fold_run(_fit_member("memoriser"), train, dev, folds=4, seed=2)
    assert set(run) == {q.qid for q in train}
    assert len(Memoriser.fits) == 4
    held_out_of = {qid: [i for i, fit in enumerate(Memoriser.fits) if qid not in fit] for qid in run}
    assert all(len(folds) == 1 for folds in held_out_of.values())  # each question held out exactly once
    assert not any(fit & {q.qid for q in [*dev, *test]} for fit in Memoriser.fits)  # members train on TRAIN only
    # A member that memorises its training labels gives its held-out questions nothing to learn from.
    assert all(score == 0.0 for scores in run.values() for score in scores.values())


def test_feature_table_rows_follow_the_pools(splits):
    train = splits[0][:3]
    runs = {"a": {q.qid: {c.doc_id: float(i) for i, c in enumerate(q.candidates)} for q in train}}
    empty = Question("empty", "Nothing to rank?", [], "train")  # no candidates, no row
    table = feature_table([*train, empty], runs, ["a"], IdfTable.fit([["x"]]))
    assert table.names == ["a:z", "a:rank", *LEXICAL_FEATURES]
    assert table.features.shape == (sum(len(q.candidates) for q in train), 2 + len(LEXICAL_FEATURES))
    assert table.group_sizes == [len(q.candidates) for q in train]
    first = table.features[: len(train[0].candidates)]
    assert first[-1, 1] == 0.0 and first[0, 1] > 0  # the highest score ranks first
    assert first[:, 0].mean() == pytest.approx(0.0)
    with pytest.raises(InputError, match="no score"):
        feature_table(train, {"a": {}}, ["a"], IdfTable.fit([["x"]]))


def test_the_stacker_never_sees_dev_or_test_labels(splits):
    train, dev, test = splits
    train_runs, dev_runs, test_runs = _member_runs(train, dev, test)
    members = ["overlap", "bm25"]
    params = StackerParams(num_leaves=3, n_estimators=20, min_child_samples=2)

    # Fixed hyper-parameters: DEV and TEST labels inverted, the fitted stacker scores TEST identically.
    honest = Stacker(members, params).fit(train, train_runs).score(test, test_runs)
    flipped = Stacker(members, params).fit(train, train_runs)
    assert flipped.score(_flipped(test), test_runs) == honest
    assert Stacker(members, params).fit(train, train_runs).score(test, test_runs) == honest
    # With one setting to choose from, DEV's labels cannot reach the fit either.
    alone, _ = select_stacker(members, train, train_runs, _flipped(dev), dev_runs, grid=[params])
    assert alone.score(test, test_runs) == honest
    # Selection reads DEV labels (by design) but never TEST's: the chosen stacker scores TEST alike.
    grid = [params, dataclasses.replace(params, n_estimators=40)]
    chosen, dev_map = select_stacker(members, train, train_runs, dev, dev_runs, grid=grid)
    again, dev_map_again = select_stacker(members, train, train_runs, dev, dev_runs, grid=grid)
    assert chosen.score(_flipped(test), test_runs) == again.score(test, test_runs)
    assert dev_map == dev_map_again and 0.0 <= dev_map <= 1.0
    # And TRAIN labels do matter: the same check with TRAIN's labels inverted must change the scores.
    assert Stacker(members, params).fit(_flipped(train), train_runs).score(test, test_runs) != honest


def test_the_stacker_refuses_runs_that_miss_candidates(splits):
    train, dev, test = splits
    train_runs, _, _ = _member_runs(train, dev, test)
    with pytest.raises(InputError, match="no score"):
        Stacker(["overlap"]).fit(train, {"overlap": {q: d for q, d in list(train_runs["overlap"].items())[1:]}})

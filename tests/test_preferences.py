"""Pairwise and top-k judging (issue 21, item 2): the conversion rule on hand-built judgements
(Bradley-Terry strengths from choix, checked against the rule's steps), the queues, and the
store's judgements with history and per-session undo on SQLite and PostgreSQL, feeding the
training-label rule and qrels."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import choix
import pytest

from db.preferences import PAIRWISE, TOPK, PreferenceJudgement
from db.store import Store
from qa_core.services.labeling import training_labels
from qa_core.services.labeling.preferences import (
    ALPHA,
    PreferenceSession,
    comparisons,
    pair_queue,
    pool_queue,
    preference_grades,
    preference_qrels,
    question_grades,
)
from qa_core.types import Candidate, Dataset, InputError, Question

AT = datetime(2026, 1, 1, tzinfo=UTC)


def pair(left: int, right: int, outcome: str, qid: str = "q") -> PreferenceJudgement:
    return PreferenceJudgement(0, qid, PAIRWISE, (left, right), outcome, (), "a", AT)


def pool(shown: tuple[int, ...], picked: tuple[int, ...], qid: str = "q") -> PreferenceJudgement:
    return PreferenceJudgement(0, qid, TOPK, shown, "picked", picked, "a", AT)


def test_each_judgement_gives_the_documented_comparisons() -> None:
    assert comparisons(pair(1, 2, "left")) == [(1, 2)]
    assert comparisons(pair(1, 2, "right")) == [(2, 1)]
    assert comparisons(pair(1, 2, "tie")) == [(1, 2), (2, 1)]
    assert comparisons(pair(1, 2, "both_bad")) == []
    assert comparisons(pool((1, 2, 3, 4), (3, 1))) == [(3, 1), (3, 2), (3, 4), (1, 2), (1, 4)]
    assert comparisons(pool((1, 2, 3), ())) == []


def test_a_chain_of_pairs_grades_by_strength_and_never_chosen_is_zero() -> None:
    # 10 > 11 > 12 and 12 vs 13 both bad: 10 and 11 were chosen, 12 and 13 never.
    judgements = [pair(10, 11, "left"), pair(11, 12, "left"), pair(12, 13, "both_bad")]
    grades = question_grades(judgements)
    assert grades == {10: 4, 11: 1, 12: 0, 13: 0}
    strengths = choix.ilsr_pairwise(4, [(0, 1), (1, 2)], alpha=ALPHA)  # the same comparisons by hand
    assert strengths[0] > strengths[1] > strengths[2]


def test_grades_spread_over_one_to_four_by_strength() -> None:
    # A top-k of 4 picks in a pool of 5: strengths strictly decreasing along the picks.
    grades = question_grades([pool((1, 2, 3, 4, 5), (1, 2, 3, 4))])
    strengths = choix.ilsr_pairwise(5, [(i, j) for i in range(4) for j in range(i + 1, 5)], alpha=ALPHA)
    low, high = strengths[3], strengths[0]
    expected = {c: 1 + round(3 * (strengths[c - 1] - low) / (high - low)) for c in (1, 2, 3, 4)}
    assert grades == {**expected, 5: 0} and grades[1] == 4 and grades[4] == 1
    assert question_grades([pair(1, 2, "tie")]) == {1: 4, 2: 4}  # equally good: both the top grade
    assert question_grades([pool((1, 2, 3), ())]) == {1: 0, 2: 0, 3: 0}  # none fits


def test_questions_are_graded_apart() -> None:
    grades = preference_grades([pair(1, 2, "left", "q1"), pair(3, 4, "right", "q2"), pair(4, 5, "tie", "q2")])
    # q2: 4 beat 3 and tied with 5, so 4 is strongest, 5 the weakest of the chosen, 3 never chosen.
    assert grades == {1: 4, 2: 0, 3: 0, 4: 4, 5: 1}


class Record:
    def __init__(self, candidate_id: int, qid: str, doc_id: str):
        self.candidate_id, self.qid, self.doc_id = candidate_id, qid, doc_id


def test_queues_follow_the_strategy_order() -> None:
    records = [Record(1, "a", "a1"), Record(2, "a", "a2"), Record(3, "a", "a3"), Record(4, "b", "b1"),
               Record(5, "b", "b2"), Record(6, "c", "c1")]
    order = [3, 4, 1, 5, 2, 6]
    assert pair_queue(order, records) == [(3, 1), (4, 5), (1, 2), (3, 2)]  # round 1 chains, round 2 skips one
    assert pool_queue(order, records) == [(3, 1, 2), (4, 5)]  # c has one candidate: nothing to compare
    assert pool_queue(order, records, size=2) == [(3, 1), (4, 5)]
    assert preference_qrels({3: 4, 5: 0}, records) == {"a": {"a3": 4}, "b": {"b2": 0}}


def dataset() -> Dataset:
    return Dataset("p", [
        Question("q1", "who wrote hamlet", [Candidate("a", "Shakespeare wrote Hamlet.", label=1),
                                             Candidate("b", "Hamlet is a play.", label=0),
                                             Candidate("c", "It is long.", label=0)], split="train"),
        Question("q2", "who painted it", [Candidate("a", "Leonardo did.", label=1),
                                          Candidate("b", "It hangs in Paris.", label=0)], split="train"),
    ])


def test_judgements_are_stored_with_history_undone_per_session_and_become_training_labels(store: Store) -> None:
    store.datasets.import_dataset(dataset())
    ids = {(r.qid, r.doc_id): r.candidate_id for r in store.datasets.candidate_rows("p")}
    tab1 = PreferenceSession.build(store, "p", "alice", PAIRWISE, "random", holder="tab1")
    tab2 = PreferenceSession.build(store, "p", "alice", PAIRWISE, "random", holder="tab2")
    assert tab1.progress() == (0, len(tab1.items)) and len(tab1.items) == 4  # q1: 2 in round 1, 1 in round 2; q2: 1
    first = tab1.current()
    tab1.judge_pair(first, "both_bad")
    assert tab1.current() != first and tab2.current() != first  # judged by alice: gone from both tabs
    tab2.judge_pair(tab2.current(), "left")
    assert tab1.undo() == first  # tab1's own judgement, not tab2's later one
    assert tab1.undo() is None and tab1.current() == first
    assert [j.outcome for j in store.preferences.preference_judgements("p")] == ["left"]

    with pytest.raises(InputError, match="one of left, right, tie, both_bad"):
        store.preferences.judge_pair(ids["q1", "a"], ids["q1", "b"], "better", "alice")
    with pytest.raises(InputError, match="candidates of one question"):
        store.preferences.judge_pair(ids["q1", "a"], ids["q2", "a"], "left", "alice")
    with pytest.raises(InputError, match="picks must be different candidates of the pool"):
        store.preferences.judge_pool([ids["q1", "a"], ids["q1", "b"]], [ids["q1", "c"]], "alice")

    store.preferences.judge_pool([ids["q1", "b"], ids["q1", "a"], ids["q1", "c"]], [ids["q1", "a"]], "bob")
    store.preferences.judge_pair(ids["q2", "b"], ids["q2", "a"], "right", "bob")
    store.labels.add_label(ids["q2", "b"], "carol", 2)  # a graded label wins over preferences
    resolved = training_labels(store, "p")
    values = {(r.qid, r.doc_id): resolved.labels[r.candidate_id] for r in resolved.candidates
              if r.candidate_id in resolved.labels}
    assert {key: (label.value, label.source) for key, label in values.items()} == {
        ("q1", "a"): (4, "preferences"), ("q1", "b"): (0, "preferences"), ("q1", "c"): (0, "preferences"),
        ("q2", "a"): (4, "preferences"), ("q2", "b"): (2, "labels"),
    }
    assert resolved.counts() == {"adjudicated": 0, "labels": 1, "preferences": 4, "gold": 0}


# ------------------------------------------------------------------ model suggestions (item 4)


def test_a_model_as_an_annotator_judges_its_first_ranked_candidate_relevant(store: Store) -> None:
    from qa_core.services.labeling.suggestions import MODEL_RELEVANT, model_disagreements, model_grades

    store.datasets.import_dataset(dataset())
    ids = {(r.qid, r.doc_id): r.candidate_id for r in store.datasets.candidate_rows("p")}
    scores = {ids["q1", "a"]: 0.2, ids["q1", "b"]: 0.9, ids["q1", "c"]: 0.1, ids["q2", "a"]: 0.7}  # q2/b unscored
    assert model_grades(scores, store.datasets.candidate_rows("p")) == {
        ids["q1", "a"]: 0, ids["q1", "b"]: MODEL_RELEVANT, ids["q1", "c"]: 0, ids["q2", "a"]: MODEL_RELEVANT}
    tied = {ids["q1", "a"]: 0.5, ids["q1", "b"]: 0.5, ids["q1", "c"]: 0.5}  # a tie: the one rule, doc id descending
    assert model_grades(tied, store.datasets.candidate_rows("p")) == {ids["q1", "a"]: 0, ids["q1", "b"]: 0,
                                                              ids["q1", "c"]: MODEL_RELEVANT}
    store.labels.add_label(ids["q1", "a"], "alice", 3)  # consensus relevant, model: not -> queued
    store.labels.add_label(ids["q1", "b"], "alice", 0)  # consensus not, model: relevant -> queued
    store.labels.add_label(ids["q1", "c"], "alice", 0)  # both say not relevant
    store.labels.add_label(ids["q2", "a"], "alice", 2)  # both relevant
    store.labels.add_label(ids["q2", "b"], "alice", 0)  # not scored: the model has no say
    queued = model_disagreements(store, "p", "overlap", scores)
    assert {(c.qid, c.doc_id): c.labels for c in queued} == {
        ("q1", "a"): {"alice": 3, "model:overlap": 0}, ("q1", "b"): {"alice": 0, "model:overlap": MODEL_RELEVANT}}
    store.labels.adjudicate(ids["q1", "a"], 3, "rita")  # settled by a reviewer: no longer queued
    assert [(c.qid, c.doc_id) for c in model_disagreements(store, "p", "overlap", scores)] == [("q1", "b")]


def test_in_team_mode_a_preference_is_the_signed_in_users_own(database_url: str) -> None:
    from qa_core.access import SYSTEM, AccessDenied
    from tests.test_guidelines_roles import sign_in

    team = Store(database_url, team=True)
    try:
        team.datasets.import_dataset(dataset(), actor=SYSTEM)
        sign_in(team, "ada")
        anna = sign_in(team, "anna")  # an annotator may judge
        ids = {(r.qid, r.doc_id): r.candidate_id for r in team.datasets.candidate_rows("p")}
        with pytest.raises(AccessDenied, match="sign in"):
            team.preferences.judge_pair(ids["q1", "a"], ids["q1", "b"], "left", "anna@example.org")
        with pytest.raises(AccessDenied, match="cannot record a judgement as annotator 'bob'"):
            team.preferences.judge_pool([ids["q1", "a"], ids["q1", "b"]], [], "bob", actor=anna)
        team.preferences.judge_pair(ids["q1", "a"], ids["q1", "b"], "left", None, actor=anna)
        assert [j.annotator for j in team.preferences.preference_judgements("p")] == ["anna@example.org"]
    finally:
        team.close()


# ------------------------------------------------------------------ leases (one item on one screen)


@pytest.mark.parametrize("mode", [PAIRWISE, TOPK])
def test_two_sessions_never_hold_the_same_item_and_an_expired_lease_frees_it(store: Store, mode: str) -> None:
    from qa_core.services.labeling import LabelingSession

    store.datasets.import_dataset(dataset())
    tab1 = PreferenceSession.build(store, "p", "alice", mode, "random", holder="tab1", lease_seconds=0.5)
    tab2 = PreferenceSession.build(store, "p", "alice", mode, "random", holder="tab2")
    bob = PreferenceSession.build(store, "p", "bob", mode, "random", holder="tab3")
    first, second = tab1.current(), tab2.current()
    assert first == tab1.items[0] and second is not None and not set(first) & set(second)
    assert tab1.current() == first and tab2.current() == second  # a rerun keeps the item on screen
    # Every other item shares a candidate with one on screen (q1's three pairs form a triangle; one pool per question).
    assert bob.current() is None
    graded = LabelingSession(store, "p", [first[0], second[0]], "carol", holder="tab4")
    assert graded.current() is None  # a candidate on a preference screen is on no graded one either

    time.sleep(0.6)  # tab1's lease runs out (a closed tab): its item is free again
    assert bob.current() == first
    assert tab1.current() not in (first, second)  # tab1 lost it, and never takes tab2's
    assert tab2.current() == second

    if mode == PAIRWISE:
        tab2.judge_pair(second, "left")
    else:
        tab2.judge_pool(second, [second[0]])
    assert store.queue.open_claims("p") and not {c.candidate_id for c in store.queue.open_claims("p") if c.holder == "tab2"}
    bob.release()  # skipped: bob's item is free for the others at once
    assert {c.holder for c in store.queue.open_claims("p")} <= {"tab1"}


def test_a_tab_that_switches_to_graded_keeps_one_pair_and_frees_the_rest(store: Store) -> None:
    from qa_core.services.labeling import LabelingSession

    store.datasets.import_dataset(dataset())
    pool = PreferenceSession.build(store, "p", "alice", TOPK, "random", holder="tab").current()
    graded = LabelingSession(store, "p", list(pool), "alice", holder="tab").current()
    assert graded.candidate_id in pool
    assert [c.candidate_id for c in store.queue.open_claims("p")] == [graded.candidate_id]  # the pool's others are free


@pytest.mark.parametrize("mode", [PAIRWISE, TOPK])
def test_sessions_racing_for_the_queue_get_disjoint_items(database_url: str, mode: str) -> None:
    sessions = 4
    questions = [Question(f"q{n}", f"question {n}", [Candidate(d, f"answer {n}{d}") for d in "abc"], "train")
                 for n in range(sessions)]
    stores = [Store(database_url) for _ in range(sessions)]  # one connection pool each, as app processes
    stores[0].datasets.import_dataset(Dataset("race", questions))
    barrier = threading.Barrier(sessions, timeout=120)

    def claim(n: int) -> tuple[int, ...] | None:
        session = PreferenceSession.build(stores[n], "race", f"ann{n}", mode, "random", holder=f"tab{n}")
        barrier.wait()
        return session.current()

    try:
        with ThreadPoolExecutor(sessions) as pool:
            items = list(pool.map(claim, range(sessions)))
    finally:
        for store in stores:
            store.close()
    assert all(item is not None for item in items)  # one question each is free for every session
    held = [c for item in items for c in item]
    assert len(held) == len(set(held))  # no candidate on two screens

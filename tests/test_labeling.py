"""Labelling: queue orders (pure), the labelling session on real databases, agreement against
hand-computed values, and the training-labels rule on a hand-made conflict table."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import NamedTuple

import pytest
from sqlalchemy import event

from db.base import CandidateRecord, LabelRecord
from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.rankers import registry
from qa_core.services.labeling import (
    LabelingSession,
    QueuePolicy,
    agreement_report,
    conflicts,
    krippendorff_alpha,
    model_scores,
    order_candidates,
    pairwise_kappa,
    training_dataset,
    training_labels,
)
from qa_core.services.labeling.strategies import spread_across_questions, uncertainty_order
from qa_core.services.labeling.training_labels import ResolvedLabel, resolve_labels
from qa_core.types import Candidate, Dataset, InputError, Question


class Pair(NamedTuple):
    candidate_id: int
    qid: str


# q1: 1, 2, 3   q2: 4, 5   q3: 6
PAIRS = [Pair(1, "q1"), Pair(2, "q1"), Pair(3, "q1"), Pair(4, "q2"), Pair(5, "q2"), Pair(6, "q3")]
T = datetime(2025, 1, 1, tzinfo=UTC)


# ------------------------------------------------------------------------------ strategies (pure)


def test_random_order_is_a_seeded_permutation() -> None:
    first = order_candidates("random", PAIRS, seed=7)
    assert sorted(first) == [1, 2, 3, 4, 5, 6]
    assert order_candidates("random", PAIRS, seed=7) == first
    assert {tuple(order_candidates("random", PAIRS, seed=s)) for s in range(5)} != {tuple(first)}


def test_uncertainty_reads_probabilities_against_one_half() -> None:
    scores = {"m": {1: 0.5, 2: 0.9, 3: 0.1, 4: 0.6, 5: 0.95}}  # 6 has no score
    order = order_candidates("uncertainty", PAIRS, seed=3, scores=scores)
    assert order[:2] == [1, 4]  # |p - 0.5| = 0 and 0.1
    assert set(order[2:4]) == {2, 3}  # both 0.4 from the boundary: seeded tie order
    assert order[4:] == [5, 6]  # unscored last
    assert order_candidates("uncertainty", PAIRS, seed=3, scores=scores) == order


def test_uncertainty_normalises_other_scores_within_each_question() -> None:
    # q1 spans 0..10, so 5 is its boundary; q2's scores are equal (maximally uncertain); q3 alone.
    scores = {1: 10.0, 2: 0.0, 3: 5.0, 4: -3.0, 5: -3.0, 6: 42.0}
    order = uncertainty_order(PAIRS, scores, seed=0)
    assert set(order[:4]) == {3, 4, 5, 6} and set(order[4:]) == {1, 2}
    # Read as probabilities the same scores would be out of range: forcing it is the caller's choice.
    assert uncertainty_order(PAIRS, {1: 0.5, 2: 0.0, 3: 1.0}, seed=0, probabilities=False)[0] in {1, 4, 5, 6}


def test_disagreement_compares_rankings_not_scales() -> None:
    scores = {
        "a": {1: 3.0, 2: 2.0, 3: 1.0, 4: 1.0, 5: 0.0},
        "b": {1: 0.1, 2: 0.2, 3: 0.3, 4: 50.0, 5: 10.0},  # q1 reversed, q2 the same ranking
    }
    order = order_candidates("disagreement", PAIRS, seed=1, scores=scores)
    assert set(order[:2]) == {1, 3}  # first and last swap: range of percentile ranks 1
    assert order[-1] == 6  # scored by no model
    assert set(order[2:5]) == {2, 4, 5}  # agree: 0


def test_diversity_spreads_judgements_across_questions() -> None:
    order = order_candidates("diversity", PAIRS, seed=5)
    qid = {p.candidate_id: p.qid for p in PAIRS}
    assert {qid[c] for c in order[:3]} == {"q1", "q2", "q3"}
    assert {qid[c] for c in order[3:5]} == {"q1", "q2"}
    assert qid[order[5]] == "q1"
    assert spread_across_questions([1, 2, 4, 3, 5, 6], PAIRS) == [1, 4, 6, 2, 5, 3]


@pytest.mark.parametrize(
    ("strategy", "scores", "message"),
    [
        ("smart", None, "unknown queue order"),
        ("uncertainty", None, "exactly one model"),
        ("uncertainty", {"a": {}, "b": {}}, "exactly one model"),
        ("disagreement", {"a": {1: 1.0}}, "two or more"),
    ],
)
def test_strategy_input_errors(strategy: str, scores: dict | None, message: str) -> None:
    with pytest.raises(InputError, match=message):
        order_candidates(strategy, PAIRS, scores=scores)


def test_model_scores_scores_every_pair_with_a_real_ranker() -> None:
    pairs = [(q, c) for q in load_demo().split("dev") for c in q.candidates]
    records = [CandidateRecord(i, q.qid, c.doc_id, q.text, c.text, c.label) for i, (q, c) in enumerate(pairs)]
    scores = model_scores(registry.create("overlap"), records)
    assert set(scores) == {r.candidate_id for r in records}
    order = order_candidates("uncertainty", records, seed=0, scores={"overlap": scores})
    assert sorted(order) == sorted(scores)


# ------------------------------------------------------------------------------ the queue on a store


def queue_dataset() -> Dataset:
    return Dataset(
        "queue",
        [
            Question("q1", "who wrote hamlet?", [Candidate(f"d{i}", f"answer {i}", label=i % 2) for i in range(3)]),
            Question("q2", "where is paris?", [Candidate(f"d{i}", f"place {i}", label=i % 2) for i in range(3)], "dev"),
        ],
    )


@pytest.fixture
def queue_store(store: Store) -> Store:
    store.datasets.import_dataset(queue_dataset())
    return store


def session(store: Store, annotator: str, holder: str | None = None, **policy: float) -> LabelingSession:
    policy.setdefault("overlap_share", 0.0)
    return LabelingSession.build(store, "queue", annotator, "random", seed=0, holder=holder, policy=QueuePolicy(**policy))


def test_session_labels_skips_and_finishes(queue_store: Store) -> None:
    alice = session(queue_store, "alice")
    first = alice.current()
    again = alice.current()  # a rerun shows the same pair, its lease renewed
    assert again.claim.claim_id == first.claim.claim_id and again.claim.expires_at >= first.claim.expires_at
    assert alice.progress()[:4] == (6, 0, 0, 6)

    alice.skip(first)
    second = alice.current()
    assert second.candidate_id != first.candidate_id
    alice.label(second, 3, note="clear")
    seen = [second.candidate_id]
    while (item := alice.current()) is not None:
        seen.append(item.candidate_id)
        alice.label(item, 1)
    assert seen[-1] == first.candidate_id  # the skipped pair came back last
    assert sorted(seen) == sorted(alice.order)
    progress = alice.progress()
    assert (progress.total, progress.complete, progress.labelled_by_me, progress.available_to_me) == (6, 6, 6, 0)
    assert queue_store.labels.current_labels("queue")[second.candidate_id] == {"alice": 3}
    assert queue_store.labels.label_history(second.candidate_id)[0]["note"] == "clear"


def test_two_sessions_hold_different_pairs_until_the_lease_ends(queue_store: Store) -> None:
    tab_a = session(queue_store, "alice", holder="tab-a", lease_seconds=0.5)
    tab_b = session(queue_store, "alice", holder="tab-b", lease_seconds=60)
    a, b = tab_a.current(), tab_b.current()
    assert a.candidate_id != b.candidate_id
    assert tab_b.progress().held_by_others == 1
    assert {c.holder for c in queue_store.queue.open_claims("queue")} == {"tab-a", "tab-b"}
    time.sleep(0.6)  # tab-a's lease runs out: its pair is free again
    tab_b.label(b, 2)
    assert tab_b.current().candidate_id == a.candidate_id
    # tab-a comes back: its claim was ended ("expired"), so it is handed another pair.
    assert tab_a.current().candidate_id not in {a.candidate_id, b.candidate_id}
    tab_a.label(a, 4)  # its judgement of the pair it showed is still written, never lost
    assert queue_store.labels.current_labels("queue")[a.candidate_id] == {"alice": 4}


def test_overlap_pairs_go_to_two_annotators_and_no_more(queue_store: Store) -> None:
    sessions = {name: session(queue_store, name, overlap=2, overlap_share=1.0) for name in ("alice", "bob", "carol")}
    handed: dict[str, list[int]] = {name: [] for name in sessions}
    for _ in range(6):
        for name in ("alice", "bob"):
            item = sessions[name].current()
            handed[name].append(item.candidate_id)
            sessions[name].label(item, 1 if name == "alice" else 2)
    assert sorted(handed["alice"]) == sorted(handed["bob"]) == sorted(sessions["alice"].order)
    assert sessions["carol"].current() is None  # every pair has the two judgements it wants
    assert sessions["carol"].progress().complete == 6


def test_overlap_sample_is_seeded_and_near_its_share() -> None:
    policy = QueuePolicy(overlap=3, overlap_share=0.25, seed=11)
    targets = policy.targets(list(range(2000)))
    assert set(targets.values()) == {1, 3}
    assert 0.2 < sum(t == 3 for t in targets.values()) / 2000 < 0.3
    assert QueuePolicy(overlap=3, overlap_share=0.25, seed=11).targets(list(range(2000))) == targets
    with pytest.raises(InputError):
        QueuePolicy(overlap_share=1.5)


def test_undo_shows_the_pair_again_and_keeps_history(queue_store: Store) -> None:
    alice = session(queue_store, "alice")
    first = alice.current()
    alice.label(first, 0)
    second = alice.current()
    alice.label(second, 4)
    shown = alice.current()
    undone = alice.undo()
    assert undone.candidate_id == second.candidate_id
    assert alice.current().candidate_id == second.candidate_id  # shown again, not the next pair
    assert shown.candidate_id not in {c.candidate_id for c in queue_store.queue.open_claims("queue")}
    alice.label(undone, 3)
    history = queue_store.labels.label_history(second.candidate_id)
    assert [(h["value"], h["retracted_at"] is not None) for h in history] == [(4, True), (3, False)]
    assert alice.progress().labelled_by_me == 2
    assert session(queue_store, "bob").undo() is None


def test_undo_takes_back_only_what_it_can_show_again(queue_store: Store) -> None:
    def queue(annotator: str, split: str) -> LabelingSession:
        return LabelingSession.build(queue_store, "queue", annotator, split=split, holder=f"{annotator}-tab",
                                     policy=QueuePolicy(overlap_share=1.0))  # every pair wants two annotators

    def alices() -> dict[int, int]:
        return {c: grades["alice"] for c, grades in queue_store.labels.current_labels("queue", "alice").items()}

    dev = queue("alice", "dev")
    item = dev.current()
    dev.label(item, 3)
    train = queue("alice", "train")
    assert train.current() is not None
    assert train.undo() is None and alices() == {item.candidate_id: 3}  # the dev label is not the train queue's
    bob = queue("bob", "dev")
    held = bob.current()
    assert held.candidate_id == item.candidate_id
    assert dev.undo() is None and alices() == {item.candidate_id: 3}  # bob's tab shows it: nothing taken back
    bob.skip(held)
    assert dev.undo().candidate_id == item.candidate_id and alices() == {}
    assert [c.holder for c in queue_store.queue.open_claims("queue")] == ["alice-tab"]  # shown again, alone


def mine(store: Store, annotator: str) -> dict[int, int]:
    """``annotator``'s current grades in the queue dataset, by candidate id."""
    return {c: grades[annotator] for c, grades in store.labels.current_labels("queue", annotator).items()}


def test_undo_takes_nothing_back_from_a_pair_adjudicated_since(queue_store: Store) -> None:
    alice = session(queue_store, "alice", holder="alice-tab")
    item = alice.current()
    alice.label(item, 3)
    queue_store.labels.adjudicate(item.candidate_id, 1, "carol")
    assert alice.undo() is None  # the queue would not show it again: the label stays
    assert mine(queue_store, "alice") == {item.candidate_id: 3}
    assert alice.current().candidate_id != item.candidate_id


def test_undo_takes_nothing_back_from_a_pair_others_judged_enough(queue_store: Store) -> None:
    alice = session(queue_store, "alice", holder="alice-tab", overlap_share=1.0)  # every pair wants two
    bob = session(queue_store, "bob", holder="bob-tab", overlap_share=1.0)
    item = alice.current()
    alice.label(item, 3)
    held = bob.current()
    assert held.candidate_id == item.candidate_id
    bob.label(held, 2)
    alice_now = session(queue_store, "alice", holder="alice-tab", overlap_share=0.0)  # the share was lowered
    assert alice_now.undo() is None  # bob's label is all the pair wants now: alice's stays
    assert mine(queue_store, "alice") == {item.candidate_id: 3}
    assert session(queue_store, "alice", holder="alice-tab", overlap_share=1.0).undo().candidate_id == item.candidate_id


@contextmanager
def before_the_next_retraction(store: Store, meanwhile: Callable[[], object]) -> Iterator[None]:
    """Run ``meanwhile`` once, just before the next undo writes the retraction of the label it
    picked: a second undo of the same label that wins the race."""
    pending = [meanwhile]

    def hook(conn: object, cursor: object, statement: str, *args: object) -> None:
        if pending and statement.lstrip().upper().startswith("INSERT INTO LABEL_RETRACTIONS"):
            pending.pop()()

    event.listen(store.engine, "before_cursor_execute", hook)
    try:
        yield
    finally:
        event.remove(store.engine, "before_cursor_execute", hook)


def test_two_undos_of_the_same_label_take_back_that_label_only(queue_store: Store) -> None:
    tab = session(queue_store, "alice", holder="alice-tab")
    for grade in (1, 2, 3):
        tab.label(tab.current(), grade)
    first, second, third = sorted(mine(queue_store, "alice"), key=lambda c: mine(queue_store, "alice")[c])
    # The judge panel's undo takes the latest label while the Label tab's undo is about to: the
    # tab's takes nothing back (not the next older label), and says so.
    judge_panel = lambda: queue_store.labels.undo_last("alice", "queue")  # noqa: E731
    with before_the_next_retraction(queue_store, judge_panel):
        assert tab.undo() is None
    assert mine(queue_store, "alice") == {first: 1, second: 2}
    # The other way round: the tab's undo wins, the judge panel's takes nothing back.
    with before_the_next_retraction(queue_store, tab.undo):
        assert queue_store.labels.undo_last("alice", "queue") is None
    assert mine(queue_store, "alice") == {first: 1}
    assert third not in mine(queue_store, "alice")


def test_adjudicated_pairs_leave_the_queue(queue_store: Store) -> None:
    records = queue_store.datasets.candidate_rows("queue")
    queue_store.labels.adjudicate(records[0].candidate_id, 2, "carol")
    alice = session(queue_store, "alice")
    handed = []
    while (item := alice.current()) is not None:
        handed.append(item.candidate_id)
        alice.label(item, 1)
    assert records[0].candidate_id not in handed and len(handed) == 5


def test_session_input_errors(queue_store: Store) -> None:
    with pytest.raises(InputError, match="annotator"):
        session(queue_store, "  ")
    with pytest.raises(InputError, match="not in dataset"):
        LabelingSession(queue_store, "queue", [999_999], "alice")
    item = session(queue_store, "alice").current()
    with pytest.raises(InputError):
        queue_store.queue.label_claim(item.claim.claim_id, 9)
    with pytest.raises(InputError):
        queue_store.queue.end_claim(item.claim.claim_id, "lost")
    with pytest.raises(InputError):
        queue_store.queue.label_claim(item.claim.claim_id + 100, 1)
    assert queue_store.labels.current_labels("queue") == {}


# ------------------------------------------------------------------------------ agreement


def test_kappa_against_hand_computed_values() -> None:
    # Binary: p_o = 3/4, p_e = 3/4*2/4 + 1/4*2/4 = 1/2, kappa = (3/4 - 1/2) / (1 - 1/2) = 1/2.
    binary = {1: {"a": 1, "b": 1}, 2: {"a": 0, "b": 0}, 3: {"a": 1, "b": 0}, 4: {"a": 1, "b": 1}}
    (pair,) = pairwise_kappa(binary)
    assert (pair.annotator_a, pair.annotator_b, pair.items) == ("a", "b", 4)
    assert pair.kappa == pytest.approx(0.5) and pair.weighted_kappa == pytest.approx(0.5)
    # Graded a = (0, 1, 2), b = (0, 2, 2): p_o = 2/3, p_e = 1/3, kappa = 1/2; quadratic weights
    # (i - j)^2: observed 1, expected (1/3)(8 + 3 + 4) = 5, weighted kappa = 1 - 1/5 = 0.8.
    graded = {1: {"a": 0, "b": 0}, 2: {"a": 1, "b": 2}, 3: {"a": 2, "b": 2}, 4: {"a": 3}}
    (pair,) = pairwise_kappa(graded)
    assert pair.items == 3
    assert pair.kappa == pytest.approx(0.5) and pair.weighted_kappa == pytest.approx(0.8)
    # One shared grade everywhere: chance agreement is perfect and kappa undefined.
    (pair,) = pairwise_kappa({1: {"a": 2, "b": 2}, 2: {"a": 2, "b": 2}})
    assert pair.kappa is None and pair.weighted_kappa is None
    assert pairwise_kappa({1: {"a": 1}, 2: {"b": 1}}) == []  # no overlap, no pair


def test_krippendorff_alpha_against_hand_computed_values() -> None:
    # Nominal, coincidences o00 = 4, o01 = o10 = 1, o11 = 2, n = 8, n0 = 5, n1 = 3:
    # alpha = 1 - (n - 1) * 2 / (2 * n0 * n1) = 1 - 14/30.
    nominal = {1: {"a": 1, "b": 1}, 2: {"a": 1, "b": 0}, 3: {"a": 0, "b": 0}, 4: {"a": 0, "b": 0}}
    assert krippendorff_alpha(nominal, "nominal") == pytest.approx(16 / 30)
    # Ordinal, a = (0, 1, 2), b = (0, 2, 2): n = (2, 1, 3); delta^2(1,2) = 4, (0,1) = 2.25,
    # (0,2) = 12.25; D_o = 8/6, D_e = 2 * (4.5 + 73.5 + 12) / 30 = 6; alpha = 1 - (8/6)/6 = 7/9.
    ordinal = {1: {"a": 0, "b": 0}, 2: {"a": 1, "b": 2}, 3: {"a": 2, "b": 2}, 4: {"c": 4}}
    assert krippendorff_alpha(ordinal) == pytest.approx(7 / 9)
    assert krippendorff_alpha({1: {"a": 1, "b": 1}, 2: {"a": 1, "b": 1}}) is None  # no variation
    assert krippendorff_alpha({1: {"a": 1}, 2: {"b": 3}}) is None  # nothing judged twice


def test_agreement_report_and_conflicts_on_the_store(queue_store: Store) -> None:
    ids = [r.candidate_id for r in queue_store.datasets.candidate_rows("queue")]
    for candidate_id, a, b in zip(ids, [0, 1, 2, 3], [0, 2, 2, 3]):
        queue_store.labels.add_label(candidate_id, "alice", a)
        queue_store.labels.add_label(candidate_id, "bob", b)
    queue_store.labels.add_label(ids[4], "alice", 1)
    report = agreement_report(queue_store, "queue")
    assert report.annotators == ["alice", "bob"] and report.items_with_overlap == 4
    (pair,) = report.pairs
    assert pair.items == 4
    assert [c.candidate_id for c in report.conflicts] == [ids[1]]
    conflict = report.conflicts[0]
    assert (conflict.qid, conflict.doc_id, conflict.labels, conflict.gold_label) == ("q1", "d1", {"alice": 1, "bob": 2}, 1)
    queue_store.labels.adjudicate(ids[1], 2, "carol")
    assert conflicts(queue_store, "queue") == []


# ------------------------------------------------------------------------------ training labels


def test_resolve_labels_on_a_hand_made_conflict_table() -> None:
    current = [
        LabelRecord(1, 10, "alice", 1, T),  # 10: adjudicated to 3, whatever the labels say
        LabelRecord(2, 10, "bob", 1, T),
        LabelRecord(3, 11, "alice", 2, T),  # 11: majority 2 of (2, 2, 0)
        LabelRecord(4, 11, "bob", 0, T),
        LabelRecord(5, 11, "carol", 2, T),
        LabelRecord(7, 12, "alice", 3, T),  # 12: tie 1 vs 3, bob's 1 is newer
        LabelRecord(8, 12, "bob", 1, T),
        LabelRecord(9, 13, "alice", 4, T),  # 13: a single annotator
        LabelRecord(6, 14, "bob", 0, T),  # 14: three-way tie, carol's 2 is newest
        LabelRecord(12, 14, "carol", 2, T),
        LabelRecord(11, 14, "alice", 4, T),
    ]
    gold = {10: 0, 13: 0, 15: 1, 16: None}  # 15: gold only; 16: nothing at all
    resolved = resolve_labels(current, {10: 3}, gold)
    assert resolved == {
        10: ResolvedLabel(3, "adjudicated"),
        11: ResolvedLabel(2, "labels"),
        12: ResolvedLabel(1, "labels"),
        13: ResolvedLabel(4, "labels"),
        14: ResolvedLabel(2, "labels"),
        15: ResolvedLabel(1, "gold"),
    }
    assert 15 not in resolve_labels(current, {10: 3})


def test_training_dataset_from_the_store(queue_store: Store) -> None:
    ids = {(r.qid, r.doc_id): r.candidate_id for r in queue_store.datasets.candidate_rows("queue")}
    queue_store.labels.add_label(ids[("q1", "d0")], "alice", 3)
    queue_store.labels.add_label(ids[("q1", "d0")], "bob", 1)  # tie: bob's is newer
    queue_store.labels.add_label(ids[("q1", "d1")], "alice", 0)
    queue_store.labels.add_label(ids[("q1", "d1")], "bob", 0)
    queue_store.labels.add_label(ids[("q1", "d2")], "alice", 2)
    queue_store.labels.add_label(ids[("q1", "d2")], "bob", 4)
    queue_store.labels.adjudicate(ids[("q1", "d2")], 3, "carol")
    queue_store.labels.add_label(ids[("q2", "d1")], "alice", 4)
    queue_store.labels.undo_last("alice")  # retracted: q2/d1 falls back to gold, or to nothing

    plain = training_labels(queue_store, "queue")
    assert {k: v.value for k, v in plain.labels.items()} == {ids[("q1", "d0")]: 1, ids[("q1", "d1")]: 0, ids[("q1", "d2")]: 3}
    assert [c.candidate_id for c in plain.conflicts] == [ids[("q1", "d0")]]
    assert plain.counts() == {"adjudicated": 1, "labels": 2, "preferences": 0, "gold": 0}

    dataset, resolved = training_dataset(queue_store, "queue", gold={"dev"})
    labels = {(q.qid, c.doc_id): c.label for q in dataset.questions for c in q.candidates}
    assert labels == {
        ("q1", "d0"): 1,
        ("q1", "d1"): 0,
        ("q1", "d2"): 3,
        ("q2", "d0"): 0,  # dev gold
        ("q2", "d1"): 1,
        ("q2", "d2"): 0,
    }
    assert resolved.counts() == {"adjudicated": 1, "labels": 2, "preferences": 0, "gold": 3}
    assert [q.split for q in dataset.questions] == ["train", "dev"]
    assert [c.text for c in dataset.questions[0].candidates] == ["answer 0", "answer 1", "answer 2"]
    everything, _ = training_dataset(queue_store, "queue", gold=True)
    assert everything.questions[0].candidates[0].label == 1  # labels still beat gold (0)

"""Depth-k pooling (issue 37): the ``pool`` queue order (pure), its progress against ir-measures'
Judged@k, and two sessions draining one pool through the store's claims on SQLite and PostgreSQL."""

from __future__ import annotations

import re
import threading
from typing import NamedTuple

import ir_measures
import pytest
from ir_measures import Judged

from db.store import Store
from qa_core.services.labeling import LabelingSession, QueuePolicy, ScoringProgress, order_candidates
from qa_core.services.labeling.pooling import pool_progress
from qa_core.services.labeling.queue import judged_candidates
from qa_core.types import Candidate, Dataset, InputError, Question


class Pair(NamedTuple):
    candidate_id: int
    qid: str
    doc_id: str
    question: str = "q"
    candidate: str = "a"


# q1: 1..4, q2: 5..7, q3: 8
PAIRS = [Pair(1, "q1", "a"), Pair(2, "q1", "b"), Pair(3, "q1", "c"), Pair(4, "q1", "d"),
         Pair(5, "q2", "a"), Pair(6, "q2", "b"), Pair(7, "q2", "c"), Pair(8, "q3", "a")]
# bm25 ranks q1: 1 2 3 4, q2: 5 6 7; overlap ranks q1: 4 3 2 1 and ties 5/6 (doc id descending: 6 first).
SCORES = {"bm25": {1: 4.0, 2: 3.0, 3: 2.0, 4: 1.0, 5: 3.0, 6: 2.0, 7: 1.0, 8: 1.0},
          "overlap": {1: 0.1, 2: 0.2, 3: 0.3, 4: 0.4, 5: 0.5, 6: 0.5, 7: 0.1, 8: 0.9}}


def test_pool_is_the_union_of_the_top_k_unjudged_first_and_spread_across_questions() -> None:
    order = order_candidates("pool", PAIRS, scores=SCORES, depth=1, seed=3)
    # depth 1: bm25's tops 1, 5, 8 and overlap's 4, 6 (the tie 5/6 goes to doc id b); one per question in turn
    assert sorted(order) == [1, 4, 5, 6, 8]
    assert {PAIRS[c - 1].qid for c in order[:3]} == {"q1", "q2", "q3"}
    judged = {1, 6}
    order = order_candidates("pool", PAIRS, scores=SCORES, depth=2, judged=judged, seed=3)
    assert sorted(order) == [1, 2, 3, 4, 5, 6, 8]  # 7 is in nobody's top 2
    assert set(order[-2:]) == judged  # judged pairs last
    assert order_candidates("pool", PAIRS, scores=SCORES, depth=2, judged=judged, seed=3) == order
    with pytest.raises(InputError, match="one or more systems"):
        order_candidates("pool", PAIRS, depth=2)
    with pytest.raises(InputError, match="depth"):
        order_candidates("pool", PAIRS, scores=SCORES, depth=0)


def test_pool_progress_counts_the_pool_and_matches_ir_measures_judged_at_k() -> None:
    judged = {1, 3, 6, 7, 8}
    progress = pool_progress(PAIRS, SCORES, 2, judged)
    assert (progress.size, progress.judged) == (7, 4)  # pool 1 2 3 4 5 6 8: 7 is judged but not pooled
    grades = {"q1": {"a": 1, "c": 0}, "q2": {"b": 0, "c": 1}, "q3": {"a": 1}}
    doc = {p.candidate_id: p for p in PAIRS}
    for system, scores in SCORES.items():
        run = {}
        for candidate_id, score in scores.items():
            run.setdefault(doc[candidate_id].qid, {})[doc[candidate_id].doc_id] = score
        # ir-measures orders ties by doc id ascending; the tie rule's order is descending, so break it in the scores
        run = {qid: {d: s + (0.001 if d == "b" and qid == "q2" else 0.0) for d, s in docs.items()}
               for qid, docs in run.items()}
        expected = ir_measures.calc_aggregate([Judged @ 2], grades, run)[Judged @ 2]
        assert progress.judged_at_depth[system] == pytest.approx(expected)
    assert "4 of 7 pairs judged" in progress.describe()


def test_a_pool_is_provisional_while_a_system_is_still_scoring() -> None:
    """bm25 has scored q1 only (4 of 8 pairs, issue 45: "smcnn 0.0%" showed at 789 of 1,420 pairs):
    the pool is called provisional, and bm25's judged@k gives way to its scoring progress."""
    partial = {"bm25": {c: s for c, s in SCORES["bm25"].items() if c <= 4}, "overlap": SCORES["overlap"]}
    scoring = {"bm25": ScoringProgress(4, 8, None), "overlap": ScoringProgress(8, 8, None)}
    progress = pool_progress(PAIRS, partial, 2, {1, 3, 6, 7, 8}, scoring)
    assert progress.provisional and progress.scoring == {"bm25": (4, 8)}
    line = progress.describe()
    assert line.startswith("Depth-2 pool so far (provisional until every system has scored: it grows as they score): ")
    assert line.endswith("judged@2 per system: bm25 scoring (4 of 8 pairs) · overlap 66.7%")
    done = pool_progress(PAIRS, SCORES, 2, {1, 3, 6, 7, 8}, {"bm25": ScoringProgress(8, 8, None)})
    assert not done.provisional and done.describe().startswith("Depth-2 pool: 4 of 7 pairs judged")


def pool_dataset() -> Dataset:
    return Dataset("pool", [
        Question(f"q{q}", f"question {q}?", [Candidate(f"d{i}", f"answer {q} {i}") for i in range(6)], "explore")
        for q in range(4)
    ])


def test_two_sessions_drain_one_pool_without_holding_the_same_pair(store: Store) -> None:
    store.datasets.import_dataset(pool_dataset())
    records = store.datasets.candidate_rows("pool")
    scores = {"first": {r.candidate_id: -int(r.doc_id[1:]) for r in records},  # d0 d1 d2 first
              "last": {r.candidate_id: int(r.doc_id[1:]) for r in records}}  # d5 d4 d3 first
    alice = LabelingSession.build(store, "pool", "alice", "pool", scores=scores, depth=2,
                                  policy=QueuePolicy(overlap_share=0.0))
    first = alice.current()
    alice.label(first, 1)  # judged before bob's session starts: his order puts it last, and it wants nobody
    bob = LabelingSession.build(store, "pool", "bob", "pool", scores=scores, depth=2,
                                policy=QueuePolicy(overlap_share=0.0))
    assert bob.order[-1] == first.candidate_id and len(bob.order) == 4 * 4
    handed: dict[str, list[int]] = {"alice": [first.candidate_id], "bob": []}

    def drain(session: LabelingSession) -> None:
        while (item := session.current()) is not None:
            handed[session.annotator].append(item.candidate_id)
            session.label(item, 2)

    threads = [threading.Thread(target=drain, args=(s,)) for s in (alice, bob)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert handed["alice"] and handed["bob"]
    assert not set(handed["alice"]) & set(handed["bob"])  # never the same pair
    assert sorted(handed["alice"] + handed["bob"]) == sorted(bob.order)  # the whole pool, and nothing else
    assert all(len(labels) == 1 for labels in store.labels.current_labels("pool").values())
    progress = pool_progress(records, scores, 2, judged_candidates(store, "pool"))
    assert (progress.size, progress.judged, progress.judged_at_depth) == (16, 16, {"first": 1.0, "last": 1.0})


def test_label_page_offers_the_pool_order_with_its_progress(store_url):
    """The Label page's ``pool`` order: the systems (the M box), the depth, and the pool's progress,
    said to be provisional while a system is still scoring, with judged@k once all have scored."""
    from tests.pages import LABEL, open_page
    from tests.waiting import wait_until

    def pool_line() -> str:
        app.run()
        assert not app.exception, app.exception
        bars = [element.proto.text.replace("\u2060", "") for element in app.get("progress")]  # as_markdown's joiners
        [line] = [bar for bar in bars if bar.startswith("Depth-2 pool")]
        scoring = [bar for bar in bars if bar.startswith("Scoring with")]
        # while the page shows a system scoring, the pool line says so and gives no judged@k of it
        assert not scoring or (line.startswith("Depth-2 pool so far (provisional") and " scoring (" in line), bars
        return "" if scoring else line

    app = open_page(LABEL)
    app.text_input(key="new_annotator").input("pia").run()
    app.selectbox(key="order").select("pool").run()
    app.multiselect(key="order_models").set_value(["overlap", "bm25"]).run()
    app.number_input(key="pool_depth").set_value(2)
    line = wait_until(pool_line, "both systems scored")
    assert re.match(r"Depth-2 pool: \d+ of [\d,]+ pairs judged · judged@2 per system: overlap [\d.]+% · bm25 [\d.]+%$",
                    line), line


def test_pairwise_judging_of_a_pool_pairs_only_pooled_candidates(store: Store) -> None:
    from qa_core.services.labeling.preferences import PAIRWISE, PreferenceSession

    store.datasets.import_dataset(pool_dataset())
    records = store.datasets.candidate_rows("pool")
    scores = {"first": {r.candidate_id: -int(r.doc_id[1:]) for r in records},
              "last": {r.candidate_id: int(r.doc_id[1:]) for r in records}}
    session = PreferenceSession.build(store, "pool", "alice", PAIRWISE, "pool", scores=scores, depth=1)
    doc_of = {r.candidate_id: r.doc_id for r in records}
    assert len(session.items) == 4  # one pair per question: its d0 (first's top 1) and d5 (last's)
    assert all({doc_of[c] for c in item} == {"d0", "d5"} for item in session.items)

"""Keeping a typed question (issue 37): the question and its BM25 pool join the dataset once, in the
``explore`` split by default, with first-stage ranks and no borrowed gold label, under the
import's rules (authorised and audited in the write's transaction), on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from db.store import Store
from qa_core.access import SYSTEM, AccessDenied
from qa_core.rankers import registry
from qa_core.services import candidate_pools, keep, ranking
from qa_core.types import InputError
from tests.teams import sign_in, small, table_rows

TYPED = "Who  WROTE the play hamlet"


def typed_ranking(store: Store, text: str) -> ranking.Ranking:
    candidates = candidate_pools.candidates_for_question(store, "d", text, k=3)
    return ranking.rank_pool(registry.create("overlap"), text, candidates, model="overlap", qid=None)


def test_a_typed_question_is_kept_once_with_its_pool_in_explore(store: Store) -> None:
    store.datasets.import_dataset(small())
    result = typed_ranking(store, TYPED)
    kept = keep.keep_question(store, "d", result)
    assert kept.added and kept.split == keep.EXPLORE_SPLIT and kept.qid.startswith("kept-")
    assert "explore" in store.datasets.dataset_summary("d")["questions"]
    question = next(q for q in store.datasets.load_dataset("d").questions if q.qid == kept.qid)
    assert question.text == TYPED.strip() and question.split == "explore"
    shown = sorted(result.pool, key=lambda c: c.first_stage_rank)
    assert [(c.doc_id, c.text, c.first_stage_rank) for c in question.candidates] == [
        (c.doc_id, c.text, c.first_stage_rank) for c in shown]
    assert all(c.label is None for c in question.candidates)  # the source question's gold judged another question
    events = store.users.audit_events(["keep question"])
    assert len(events) == 1 and kept.qid in events[0]["target"]

    stamp = store.datasets.dataset_stamp("d")
    again = keep.keep_question(store, "d", typed_ranking(store, "who wrote the PLAY   Hamlet"))
    assert (again.qid, again.added) == (kept.qid, False)  # the same text, case and spacing aside
    assert store.datasets.dataset_stamp("d") == stamp  # nothing added: the pages' caches hold
    existing = keep.keep_question(store, "d", typed_ranking(store, "who wrote hamlet"), "train")
    assert (existing.qid, existing.added) == ("q1", False)  # a dataset question's text is not kept twice
    assert len(store.users.audit_events(["keep question"])) == 1

    # Judged and queued like any other question: a label lands on it, the explore queue offers it.
    rows = store.datasets.candidate_rows("d", split="explore")
    assert {r.qid for r in rows} == {kept.qid}
    store.labels.add_label(rows[0].candidate_id, "alice", 3)
    assert store.labels.qrels("d", source="labels")[kept.qid] == {rows[0].doc_id: 3}
    with pytest.raises(InputError, match="already"):
        keep.keep_question(store, "d", keep.as_kept(result, kept))


def test_keeping_needs_the_right_to_import_in_team_mode(database_url: str) -> None:
    store = Store(database_url, team=True)
    try:
        store.datasets.import_dataset(small(), actor=SYSTEM)
        ada, anna = sign_in(store, "ada"), sign_in(store, "anna")
        result = typed_ranking(store, TYPED)
        before = table_rows(database_url, ("questions", "candidates", "audit_events"))
        with pytest.raises(AccessDenied, match="may not import"):
            keep.keep_question(store, "d", result, actor=anna)
        assert table_rows(database_url, ("questions", "candidates", "audit_events")) == before
        assert keep.keep_question(store, "d", result, "test", actor=ada).split == "test"
    finally:
        store.close()


def test_ask_keeps_the_typed_question_and_judges_its_pool_at_once(store_url: str) -> None:
    """On Ask (AppTest): the kept question's pool on screen is judged on it without asking again."""
    from tests.pages import ASK, open_page

    app = open_page(ASK)
    app.selectbox(key="model").select("overlap")
    app.text_input(key="question").input("which scientist discovered penicillin")
    app.button[0].click().run()
    assert app.selectbox(key="keep_split").value == keep.EXPLORE_SPLIT
    assert not [b for b in app.button if str(b.key).startswith("judge-grade")]
    app.button(key="keep").click().run()
    assert not app.exception, app.exception
    assert any(s.value.replace("\u2060", "").startswith("Kept as question kept-") for s in app.success)
    assert [b for b in app.button if str(b.key).startswith("judge-grade")]  # judged on the kept question now
    assert not [b for b in app.button if b.key == "keep"]
    store = Store(store_url)
    try:
        assert "explore" in store.datasets.dataset_summary("demo")["questions"]
    finally:
        store.close()


def test_a_whole_collection_ranking_keeps_only_what_the_first_stage_found(store: Store) -> None:
    """Ask's whole-collection option ranks every sentence; keeping it keeps BM25's pool, not the collection."""
    import dataclasses

    store.datasets.import_dataset(small())
    result = typed_ranking(store, TYPED)
    unfound = [dataclasses.replace(c, doc_id=f"{c.doc_id}-x", first_stage_rank=None) for c in result.pool]
    whole = ranking.rank_pool(registry.create("overlap"), TYPED, [*result.pool, *unfound], model="overlap", qid=None)
    kept = keep.keep_question(store, "d", whole)
    question = next(q for q in store.datasets.load_dataset("d").questions if q.qid == kept.qid)
    assert sorted(c.doc_id for c in question.candidates) == sorted(c.doc_id for c in result.pool)

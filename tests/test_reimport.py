"""Re-importing a dataset keeps every judgement on its text, on SQLite and PostgreSQL: candidates
are matched by content (explicit ids where the file has them, else question and candidate text),
nothing is deleted, and labels whose candidate left the file stay listed and exportable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from db.labeling import QueueScope
from db.models import CandidateRow, LabelRow
from db.store import Store
from qa_core.data.importers import load_dataset
from qa_core.types import Candidate, Dataset, InputError, Question

CSV_HEAD = "question,candidate,label\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def texts_with_labels(store: Store, dataset: str) -> dict[str, dict[str, int]]:
    """Current labels keyed by candidate text: what a judgement is about."""
    by_id = {row.candidate_id: row.candidate for row in store.datasets.candidate_rows(dataset)}
    return {by_id[candidate]: labels for candidate, labels in store.labels.current_labels(dataset).items()}


def label_text(store: Store, dataset: str, text: str, annotator: str, value: int) -> int:
    [candidate] = [row.candidate_id for row in store.datasets.candidate_rows(dataset) if row.candidate == text]
    return store.labels.add_label(candidate, annotator, value)


def test_swapped_csv_rows_keep_their_labels(store: Store, tmp_path: Path) -> None:
    """The issue's case: grade 4 on "alice wrote x" must not land on "bob wrote y"."""
    first = write(tmp_path / "a.csv", CSV_HEAD + "who wrote x,alice wrote x,1\nwho wrote x,bob wrote y,0\n")
    store.datasets.import_dataset(load_dataset(first, name="pairs"))
    label_text(store, "pairs", "alice wrote x", "ann", 4)
    label_text(store, "pairs", "bob wrote y", "ann", 0)

    swapped = write(tmp_path / "b.csv", CSV_HEAD + "who wrote x,bob wrote y,0\nwho wrote x,alice wrote x,1\n")
    report = store.datasets.import_dataset(load_dataset(swapped, name="pairs"), replace=True)
    assert texts_with_labels(store, "pairs") == {"alice wrote x": {"ann": 4}, "bob wrote y": {"ann": 0}}
    assert (len(report.moved), report.matched, report.new, len(report.retired)) == (2, 0, 0, 0)
    [question] = store.datasets.load_dataset("pairs").questions
    assert [c.text for c in question.candidates] == ["bob wrote y", "alice wrote x"]  # the file's order
    qid = question.qid
    assert store.labels.qrels("pairs") == {qid: {f"{qid}-0": 0, f"{qid}-1": 4}}


def wikiqa(folder: Path, rows: list[tuple[str, str, int, str]]) -> Path:
    split = folder / "train"
    write(split / "a.toks", "".join(f"{q}\n" for q, _, _, _ in rows))
    write(split / "b.toks", "".join(f"{c}\n" for _, c, _, _ in rows))
    write(split / "sim.txt", "".join(f"{label}\n" for _, _, label, _ in rows))
    write(split / "id.txt", "".join(f"{qid}\n" for _, _, _, qid in rows))
    return folder


WIKI = [
    ("Who Wrote Hamlet", "Shakespeare Wrote Hamlet", 1, "1"),
    ("Who Wrote Hamlet", "Hamlet Is A Prince", 0, "1"),
    ("Who Wrote Hamlet", "Denmark Is Cold", 0, "1"),
    ("Where Is Paris", "Paris Is In France", 1, "2"),
    ("Where Is Paris", "France Has Wine", 0, "2"),
]


def test_reordered_wikiqa_candidates_keep_their_labels(store: Store, tmp_path: Path) -> None:
    store.datasets.import_dataset(load_dataset(wikiqa(tmp_path / "w1", WIKI), name="wiki"))
    label_text(store, "wiki", "Shakespeare Wrote Hamlet", "ann", 4)
    label_text(store, "wiki", "Paris Is In France", "ann", 4)
    label_text(store, "wiki", "Denmark Is Cold", "ann", 0)
    shuffled = [WIKI[2], WIKI[0], WIKI[1], WIKI[4], WIKI[3]]
    report = store.datasets.import_dataset(load_dataset(wikiqa(tmp_path / "w2", shuffled), name="wiki"), replace=True)
    assert texts_with_labels(store, "wiki") == {
        "Shakespeare Wrote Hamlet": {"ann": 4}, "Paris Is In France": {"ann": 4}, "Denmark Is Cold": {"ann": 0}
    }
    assert len(report.moved) == 5 and not report.retired
    gold = {c.text: c.label for q in store.datasets.load_dataset("wiki").questions for c in q.candidates}
    assert all(gold[text] == 1 for text, labels in texts_with_labels(store, "wiki").items() if labels["ann"] == 4)


def test_a_dropped_question_keeps_its_labels_listed_and_exportable(store: Store, tmp_path: Path) -> None:
    store.datasets.import_dataset(load_dataset(wikiqa(tmp_path / "w1", WIKI), name="wiki"))
    for text, value in (("Shakespeare Wrote Hamlet", 4), ("Hamlet Is A Prince", 1), ("Denmark Is Cold", 0)):
        label_text(store, "wiki", text, "ann", value)
    label_text(store, "wiki", "Paris Is In France", "bob", 3)

    report = store.datasets.import_dataset(load_dataset(wikiqa(tmp_path / "w2", WIKI[3:]), name="wiki"), replace=True)
    assert (report.orphaned_labels, len(report.retired), report.matched) == (3, 3, 2)
    assert sorted(labels for _, _, labels in report.retired) == [1, 1, 1]
    assert texts_with_labels(store, "wiki") == {"Paris Is In France": {"bob": 3}}
    assert store.datasets.dataset_summary("wiki")["orphaned_labels"] == 3
    orphans = store.labels.orphaned_labels("wiki")
    assert sorted((o["candidate"], o["value"]) for o in orphans) == [
        ("Denmark Is Cold", 0), ("Hamlet Is A Prince", 1), ("Shakespeare Wrote Hamlet", 4)
    ]
    assert all(o["question"] == "Who Wrote Hamlet" and o["retired_at"] for o in orphans)
    exported = tmp_path / "labels.jsonl"
    assert store.labels.export_labels_jsonl("wiki", exported) == 4
    records = [json.loads(line) for line in exported.read_text().splitlines()]
    assert sum(r["retired_at"] is not None for r in records) == 3
    with store.session_scope() as session:
        assert session.scalar(select(func.count()).select_from(LabelRow)) == 4  # nothing deleted

    # The question comes back: its candidates are revived with their labels current again.
    back = store.datasets.import_dataset(load_dataset(wikiqa(tmp_path / "w3", WIKI), name="wiki"), replace=True)
    assert (back.revived, back.new, back.orphaned_labels) == (3, 0, 0)
    assert texts_with_labels(store, "wiki")["Shakespeare Wrote Hamlet"] == {"ann": 4}
    assert store.labels.orphaned_labels("wiki") == []


def explicit(texts: dict[str, str]) -> Dataset:
    return Dataset("ids", [Question("q1", "who wrote hamlet", [Candidate(d, t, label=0) for d, t in texts.items()])])


def test_explicit_ids_carry_labels_through_text_edits(store: Store) -> None:
    store.datasets.import_dataset(explicit({"d1": "Shakespere wrote it", "d2": "a prince"}))
    store.labels.add_label(store.datasets.find_candidate_id("ids", "q1", "d1"), "ann", 3)
    report = store.datasets.import_dataset(explicit({"d2": "a prince", "d1": "Shakespeare wrote it"}), replace=True)
    assert (report.matched, report.edited, report.new, report.retired) == (2, 1, 0, [])
    assert texts_with_labels(store, "ids") == {"Shakespeare wrote it": {"ann": 3}}


def test_a_changed_question_text_retires_the_old_question(store: Store, tmp_path: Path) -> None:
    first = write(tmp_path / "a.csv", "qid,question,candidate,label\nq1,who wrote x,alice wrote x,1\n")
    store.datasets.import_dataset(load_dataset(first, name="pairs"))
    label_text(store, "pairs", "alice wrote x", "ann", 2)
    edited = write(tmp_path / "b.csv", "qid,question,candidate,label\nq1,who wrote x?,alice wrote x,1\n")
    report = store.datasets.import_dataset(load_dataset(edited, name="pairs"), replace=True)
    assert (report.new, len(report.retired), report.orphaned_labels) == (1, 1, 1)
    assert store.labels.current_labels("pairs") == {}
    assert [o["question"] for o in store.labels.orphaned_labels("pairs")] == ["who wrote x"]
    assert [q.text for q in store.datasets.load_dataset("pairs").questions] == ["who wrote x?"]


def test_repeated_texts_are_matched_one_to_one(store: Store, tmp_path: Path) -> None:
    rows = CSV_HEAD + "q,same answer,0\nq,same answer,0\nq,other,1\n"
    store.datasets.import_dataset(load_dataset(write(tmp_path / "a.csv", rows), name="dup"))
    ids = [row.candidate_id for row in store.datasets.candidate_rows("dup")]
    store.labels.add_label(ids[0], "ann", 1)
    store.labels.add_label(ids[1], "ann", 2)
    again = store.datasets.import_dataset(load_dataset(write(tmp_path / "b.csv", rows), name="dup"), replace=True)
    assert (again.matched, again.new, again.moved, again.retired) == (3, 0, [], [])
    assert store.labels.current_labels("dup") == {ids[0]: {"ann": 1}, ids[1]: {"ann": 2}}


def test_rows_from_before_the_identity_keys_are_matched_by_text(store: Store, tmp_path: Path) -> None:
    """A store upgraded from revision 0002 has candidates without keys: the first re-import of a
    reordered file still finds them by their text."""
    first = write(tmp_path / "a.csv", CSV_HEAD + "q,alice wrote x,1\nq,bob wrote y,0\n")
    store.datasets.import_dataset(load_dataset(first, name="old"))
    label_text(store, "old", "alice wrote x", "ann", 4)
    with store.session_scope() as session:
        session.execute(update(CandidateRow).values(match_key=None, position=None))
    swapped = write(tmp_path / "b.csv", CSV_HEAD + "q,bob wrote y,0\nq,alice wrote x,1\n")
    report = store.datasets.import_dataset(load_dataset(swapped, name="old"), replace=True)
    assert (len(report.moved), report.new) == (2, 0)
    assert texts_with_labels(store, "old") == {"alice wrote x": {"ann": 4}}


def test_open_claims_on_retired_candidates_end_and_a_late_label_is_kept(store: Store, tmp_path: Path) -> None:
    store.datasets.import_dataset(load_dataset(write(tmp_path / "a.csv", CSV_HEAD + "q,gone,1\nq,stays,0\n"), name="c"))
    gone, stays = (row.candidate_id for row in store.datasets.candidate_rows("c"))
    claim = store.queue.claim_next(QueueScope("c", [gone], "ann"))
    kept_claim = store.queue.claim_next(QueueScope("c", [stays], "bob"))
    store.datasets.import_dataset(load_dataset(write(tmp_path / "b.csv", CSV_HEAD + "q,stays,0\n"), name="c"), replace=True)
    assert [c.claim_id for c in store.queue.open_claims("c")] == [kept_claim.claim_id]
    label_id = store.queue.label_claim(claim.claim_id, 3)  # the page sends it after the re-import: not lost
    assert [o["value"] for o in store.labels.orphaned_labels("c")] == [3]
    assert store.labels.label_history(gone)[0]["id"] == label_id


def test_replace_is_refused_without_the_flag_and_changes_the_stamp(store: Store, tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", CSV_HEAD + "q,a,1\n")
    store.datasets.import_dataset(load_dataset(path, name="s"))
    stamp = store.datasets.dataset_stamp("s")
    with pytest.raises(InputError, match="already exists"):
        store.datasets.import_dataset(load_dataset(path, name="s"))
    assert store.datasets.dataset_stamp("s") == stamp
    store.datasets.import_dataset(load_dataset(path, name="s"), replace=True)
    assert store.datasets.dataset_stamp("s") != stamp


def test_importing_the_same_qrels_twice_adds_nothing(store: Store, tmp_path: Path) -> None:
    store.datasets.import_dataset(explicit({"d1": "one", "d2": "two"}))
    qrels = {"q1": {"d1": 2, "d2": 0}}
    assert store.labels.import_qrels("ids", qrels, "trec") == (2, 0)
    assert store.labels.import_qrels("ids", qrels, "trec") == (0, 2)
    assert store.labels.import_qrels("ids", {"q1": {"d1": 3, "d2": 0}}, "trec") == (1, 1)  # a changed grade is new
    with store.session_scope() as session:
        assert session.scalar(select(func.count()).select_from(LabelRow)) == 3
    assert store.labels.qrels("ids") == {"q1": {"d1": 3, "d2": 0}}

"""The store on real databases: every test runs on SQLite and on PostgreSQL (see conftest)."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import func, inspect, select, text

from db.base import NewVersion
from db.models import Base, CandidateRow, LabelRow, RunScoreRow
from db.session import downgrade, make_engine, upgrade
from db.store import Store
from qa_core.types import Candidate, Dataset, InputError, Question
from tests.conftest import head_revision, model_file

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def small_dataset(name: str = "demo") -> Dataset:
    return Dataset(
        name=name,
        source="unit test",
        questions=[
            Question(
                qid="q1",
                text="who wrote hamlet?",
                split="train",
                candidates=[
                    Candidate("d1", "Shakespeare wrote Hamlet.", label=1, first_stage_rank=1, first_stage_score=9.5),
                    Candidate("d2", "Hamlet is a prince.", label=0, source="wiki", url="https://example.org/h"),
                    Candidate("d3", "Unjudged sentence."),
                ],
            ),
            Question(
                qid="q2",
                text="what is the capital of france?",
                split="dev",
                candidates=[
                    Candidate("d1", "Paris is the capital of France.", label=3),
                    Candidate("d4", "France is in Europe.", label=0),
                ],
            ),
        ],
    )


def schema(connection) -> dict[str, dict]:
    """Everything reflection sees of each table, in a form that ignores the order of columns and
    constraints (a migration adds columns at the end; the models list them elsewhere)."""
    inspector = inspect(connection)

    def frozen(items: list[dict]) -> list[str]:
        return sorted(repr(sorted((key, repr(value)) for key, value in item.items())) for item in items)

    return {
        table: {
            "columns": frozen([{**c, "type": str(c["type"])} for c in inspector.get_columns(table)]),
            "primary key": frozen([inspector.get_pk_constraint(table)]),
            "foreign keys": frozen(inspector.get_foreign_keys(table)),
            "indexes": frozen([{**i, "dialect_options": {k: str(v) for k, v in i["dialect_options"].items()}}
                               for i in inspector.get_indexes(table)]),  # partial indexes' WHERE, as SQL
            "unique": frozen(inspector.get_unique_constraints(table)),
            "checks": frozen(inspector.get_check_constraints(table)),
        }
        for table in inspector.get_table_names()
    }


def test_a_new_store_has_the_schema_the_migrations_build(database_url: str) -> None:
    """A new store is created from the models and stamped head (``db.session.upgrade``); a store
    that went through every migration must end up with the very same tables, and both match the
    models for Alembic's autogenerate."""
    created = Store(database_url)
    migrated_url = database_url.replace("store.sqlite", "migrated.sqlite")
    if migrated_url == database_url:  # PostgreSQL: a schema of its own in the same database
        migrated_url = f"{database_url}?options=-csearch_path%3Dmigrated"
        with created.engine.begin() as connection:
            connection.execute(text("CREATE SCHEMA migrated"))
    engine = make_engine(migrated_url)
    try:
        upgrade(engine, "0001")  # not empty any more: head is reached by replaying the revisions
        with engine.connect() as connection:  # a database (or schema) of its own, not the new store's
            assert MigrationContext.configure(connection).get_current_revision() == "0001"
        upgrade(engine, "head")
        with created.engine.connect() as new, engine.connect() as old:
            tables = schema(new)
            assert tables == schema(old)
            for connection in (new, old):
                diff = compare_metadata(MigrationContext.configure(connection, opts={"compare_type": True}),
                                        Base.metadata)  # fmt: skip
                assert diff == []
            migrated_id = old.execute(text("SELECT value FROM store_info WHERE key = 'store_id'")).scalar()
        assert migrated_id and created.store_id and created.store_id != migrated_id
    finally:
        engine.dispose()
        created.close()
    assert {"datasets", "questions", "candidates", "labels", "model_versions", "runs", "run_scores"} <= set(tables)
    assert {"label_retractions", "adjudications", "queue_claims", "training_jobs", "training_events"} <= set(tables)


def test_upgrade_is_idempotent(store: Store, database_url: str) -> None:
    store.datasets.import_dataset(small_dataset())
    again = Store(database_url)
    try:
        assert again.datasets.dataset_names() == ["demo"]
    finally:
        again.close()


def test_sqlite_pragmas(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'pragmas.sqlite'}")
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
    finally:
        engine.dispose()


def test_import_round_trip(store: Store) -> None:
    dataset = small_dataset()
    store.datasets.import_dataset(dataset)
    loaded = store.datasets.load_dataset("demo")
    assert loaded == dataset
    assert [q.qid for q in store.datasets.load_dataset("demo", split="dev").questions] == ["q2"]
    assert store.datasets.dataset_names() == ["demo"]
    summary = store.datasets.dataset_summary("demo")
    assert summary["questions"] == {"dev": 1, "train": 1}
    assert (summary["candidates"], summary["positives"], summary["labelled"]) == (5, 2, 0)


def test_import_accepts_numpy_scalars(store: Store) -> None:
    candidate = Candidate("d1", "text", label=np.int64(2), first_stage_rank=np.int32(1), first_stage_score=np.float32(0.5))
    store.datasets.import_dataset(Dataset("np", [Question("q1", "question", [candidate])]))
    loaded = store.datasets.load_dataset("np").questions[0].candidates[0]
    assert (loaded.label, loaded.first_stage_rank, loaded.first_stage_score) == (2, 1, 0.5)
    assert type(loaded.label) is int


def test_unknown_dataset_lists_known_names(store: Store) -> None:
    store.datasets.import_dataset(small_dataset("alpha"))
    with pytest.raises(InputError, match="alpha"):
        store.datasets.load_dataset("beta")


def test_failed_import_writes_nothing(store: Store) -> None:
    store.datasets.import_dataset(small_dataset())
    broken = small_dataset("broken")
    broken.questions[1].candidates.append(Candidate("d4", "duplicate doc id"))
    with pytest.raises(InputError, match="d4"):
        store.datasets.import_dataset(broken)
    with pytest.raises(InputError):
        store.datasets.import_dataset(broken, replace=True)
    assert store.datasets.dataset_names() == ["demo"]
    broken.name = "demo"
    with pytest.raises(InputError):
        store.datasets.import_dataset(broken, replace=True)
    assert store.datasets.load_dataset("demo") == small_dataset()


def test_duplicate_name_and_replace(store: Store) -> None:
    store.datasets.import_dataset(small_dataset())
    with pytest.raises(InputError, match="already exists"):
        store.datasets.import_dataset(small_dataset())
    kept = store.datasets.find_candidate_id("demo", "q1", "d2")
    store.labels.add_label(kept, "ann", 2)
    store.labels.add_label(store.datasets.find_candidate_id("demo", "q2", "d4"), "ann", 1)
    replacement = small_dataset()
    replacement.questions.pop()  # q2 and its candidates disappear
    report = store.datasets.import_dataset(replacement, replace=True)
    assert store.datasets.load_dataset("demo") == replacement
    new_id = store.datasets.find_candidate_id("demo", "q1", "d2")
    assert new_id == kept  # updated in place, not re-inserted
    assert store.labels.current_labels("demo") == {new_id: {"ann": 2}}
    assert (report.matched, [(qid, doc) for qid, doc, _ in report.retired], report.orphaned_labels) == (
        3, [("q2", "d1"), ("q2", "d4")], 1
    )
    assert [(o["qid"], o["doc_id"], o["value"]) for o in store.labels.orphaned_labels("demo")] == [("q2", "d4", 1)]


def test_bulk_import_of_ten_thousand_candidates(store: Store) -> None:
    questions = [
        Question(f"q{i}", f"question {i}", [Candidate(f"d{j}", f"answer {i} {j}", label=j % 2) for j in range(50)])
        for i in range(200)
    ]
    store.datasets.import_dataset(Dataset("big", questions))
    assert store.datasets.dataset_summary("big")["candidates"] == 10_000
    assert len(store.datasets.candidate_rows("big")) == 10_000


def test_candidate_rows(store: Store) -> None:
    store.datasets.import_dataset(small_dataset())
    rows = store.datasets.candidate_rows("demo", split="dev")
    assert [(r.qid, r.doc_id, r.question, r.candidate, r.gold_label) for r in rows] == [
        ("q2", "d1", "what is the capital of france?", "Paris is the capital of France.", 3),
        ("q2", "d4", "what is the capital of france?", "France is in Europe.", 0),
    ]
    assert rows[0].candidate_id == store.datasets.find_candidate_id("demo", "q2", "d1")
    with pytest.raises(InputError):
        store.datasets.find_candidate_id("demo", "q2", "d2")


def test_label_history_is_append_only(store: Store) -> None:
    store.datasets.import_dataset(small_dataset())
    candidate_id = store.datasets.find_candidate_id("demo", "q1", "d1")
    store.labels.add_label(candidate_id, "alice", 1)
    store.labels.add_label(candidate_id, "alice", 3, note="on second reading")
    store.labels.add_label(candidate_id, "bob", 0)
    history = store.labels.label_history(candidate_id)
    assert [(h["annotator"], h["value"], h["note"]) for h in history] == [
        ("alice", 1, None),
        ("alice", 3, "on second reading"),
        ("bob", 0, None),
    ]
    assert all(h["created_at"].tzinfo is not None for h in history)
    assert store.labels.current_labels("demo") == {candidate_id: {"alice": 3, "bob": 0}}
    assert store.labels.current_labels("demo", annotator="alice") == {candidate_id: {"alice": 3}}
    assert store.datasets.dataset_summary("demo")["labelled"] == 1


@pytest.mark.parametrize(
    ("annotator", "value"), [("", 1), ("   ", 1), ("alice", 5), ("alice", -1), ("alice", 2.0), ("alice", True)]
)
def test_invalid_labels_are_rejected(store: Store, annotator: str, value: object) -> None:
    store.datasets.import_dataset(small_dataset())
    candidate_id = store.datasets.find_candidate_id("demo", "q1", "d1")
    with pytest.raises(InputError):
        store.labels.add_label(candidate_id, annotator, value)  # type: ignore[arg-type]
    assert store.labels.label_history(candidate_id) == []


def test_label_on_unknown_candidate(store: Store) -> None:
    with pytest.raises(InputError, match="no candidate"):
        store.labels.add_label(12345, "alice", 1)


def test_export_qrels(store: Store, tmp_path: Path) -> None:
    store.datasets.import_dataset(small_dataset())
    first = store.datasets.find_candidate_id("demo", "q1", "d1")
    store.labels.add_label(first, "alice", 1)
    store.labels.add_label(first, "bob", 2)  # the latest label of any annotator counts
    store.labels.add_label(store.datasets.find_candidate_id("demo", "q2", "d4"), "alice", 0)

    labels_path = tmp_path / "out" / "labels.qrels"
    assert store.labels.export_qrels("demo", labels_path) == 2
    assert labels_path.read_text().splitlines() == ["q1 0 d1 2", "q2 0 d4 0"]

    gold_path = tmp_path / "gold.qrels"
    assert store.labels.export_qrels("demo", gold_path, source="gold") == 4
    assert gold_path.read_text().splitlines() == ["q1 0 d1 1", "q1 0 d2 0", "q2 0 d1 3", "q2 0 d4 0"]
    assert store.labels.qrels("demo", "gold") == {"q1": {"d1": 1, "d2": 0}, "q2": {"d1": 3, "d4": 0}}
    with pytest.raises(InputError):
        store.labels.export_qrels("demo", gold_path, source="other")
    assert [p.name for p in tmp_path.rglob("*.tmp")] == []


def test_export_labels_jsonl(store: Store, tmp_path: Path) -> None:
    store.datasets.import_dataset(small_dataset())
    candidate_id = store.datasets.find_candidate_id("demo", "q2", "d1")
    store.labels.add_label(candidate_id, "alice", 4, note="exact")
    store.labels.add_label(candidate_id, "alice", 3)
    path = tmp_path / "labels.jsonl"
    assert store.labels.export_labels_jsonl("demo", path) == 2
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["qid"], r["doc_id"], r["annotator"], r["value"], r["note"]) for r in records] == [
        ("q2", "d1", "alice", 4, "exact"),
        ("q2", "d1", "alice", 3, None),
    ]
    assert records[0]["question"] == "what is the capital of france?"
    assert records[0]["candidate"] == "Paris is the capital of France."
    assert records[0]["created_at"].endswith("+00:00")


def test_model_registry(store: Store) -> None:
    assert store.models.promoted_model("smcnn", "demo") is None
    first = store.models.register_model("smcnn", NewVersion("smcnn", model_file("1.pt"), {"dataset": "demo"}, {"map": 0.5}))
    store.models.register_model("smcnn", NewVersion("smcnn", model_file("2.pt"), {"dataset": "demo"}, {"map": 0.6}))
    store.models.register_model("question_class", NewVersion("question_class", model_file("qc"), {"path": "x"}, {}))
    assert [v["version"] for v in store.models.model_versions("smcnn")] == [1, 2]
    newest = store.models.promoted_model("smcnn", "demo")
    assert (newest["version"], newest["promoted"]) == (2, False)  # newest trained on demo when none is promoted

    store.models.promote("smcnn", 1, "demo")
    promoted = store.models.promoted_model("smcnn", "demo")
    assert (promoted["id"], promoted["version"], promoted["metrics"], promoted["promoted"]) == (first, 1, {"map": 0.5}, True)
    store.models.register_model("smcnn", NewVersion("smcnn", model_file("3.pt"), {"dataset": "demo"}, {}, promote=True))
    assert [(v["version"], v["promoted_for"]) for v in store.models.model_versions("smcnn")] == [(1, []), (2, []), (3, ["demo"])]
    assert store.models.promoted_model("question_class")["version"] == 1  # models without a dataset serve every one ("*")
    with pytest.raises(InputError):
        store.models.promote("smcnn", 9, "demo")
    assert store.models.promoted_model("smcnn", "demo")["version"] == 3


def test_a_model_name_is_promoted_per_dataset(store: Store) -> None:
    """Issue 22: training on TrecQA must not change what WikiQA's pages use, and roll back stays
    within the dataset."""
    wiki = store.models.register_model("smcnn", NewVersion("smcnn", model_file("w1.pt"), {"dataset": "wikiqa"}, {}, promote=True))
    trec = store.models.register_model("smcnn", NewVersion("smcnn", model_file("t2.pt"), {"dataset": "trecqa"}, {}, promote=True))
    assert store.models.promoted_model("smcnn", "wikiqa")["id"] == wiki
    assert store.models.promoted_model("smcnn", "trecqa")["id"] == trec
    assert store.models.promoted_model("smcnn", "demo") is None  # nothing trained on or promoted for it
    assert store.models.rollback_target("smcnn", "trecqa") is None  # wikiqa's version was never promoted for trecqa
    store.models.register_model("smcnn", NewVersion("smcnn", model_file("w3.pt"), {"dataset": "wikiqa"}, {}, promote=True))
    assert store.models.rollback_target("smcnn", "wikiqa")["id"] == wiki
    store.models.promote("smcnn", 2, "demo")  # a model trained on one dataset, explicitly promoted for another
    assert store.models.promoted_model("smcnn", "demo")["checkpoint_path"] == model_file("t2.pt")
    assert store.models.model_version(trec)["promoted_for"] == ["demo", "trecqa"]
    assert [v["version"] for v in store.models.promotion_history("smcnn", "wikiqa")] == [3, 1]


def test_concurrent_registrations_get_distinct_versions(store: Store) -> None:
    errors: list[BaseException] = []

    def register() -> None:
        try:
            store.models.register_model("m", NewVersion("k", model_file("x"), {}, {}))
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=register) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(v["version"] for v in store.models.model_versions("m")) == [1, 2, 3, 4]


def test_save_and_load_run(store: Store) -> None:
    store.datasets.import_dataset(small_dataset())
    model_id = store.models.register_model("bm25", NewVersion("bm25", model_file("bm25"), {}, {}))
    scores = {"q1": {"d1": 0.5, "d2": 2.0, "d3": -1.0}, "q2": {"d1": 1.0, "d4": 1.0}}
    run_id = store.runs.save_run("demo", "train", scores, {"map": 0.75}, model_version_id=model_id, tag="first")
    assert store.runs.load_run(run_id) == scores
    assert list(store.runs.load_run(run_id)["q1"]) == ["d2", "d1", "d3"]  # rank order
    assert list(store.runs.load_run(run_id)["q2"]) == ["d4", "d1"]  # a tie: the one rule, doc id descending
    (listed,) = store.runs.runs("demo")
    assert (listed["id"], listed["tag"], listed["metrics"], listed["model"]) == (run_id, "first", {"map": 0.75}, "bm25")
    with pytest.raises(InputError):
        store.runs.save_run("demo", None, {"q1": {"nope": 1.0}}, {})
    assert len(store.runs.runs()) == 1
    with pytest.raises(InputError):
        store.runs.load_run(run_id + 100)


def test_set_first_stage(store: Store) -> None:
    store.datasets.import_dataset(small_dataset())
    imported = store.datasets.dataset_stamp("demo")
    assert store.datasets.set_first_stage("demo", {"q1": [("d3", 1, 7.0), ("d1", 2, 3.5)]}) == 2
    stamp = store.datasets.dataset_stamp("demo")
    assert stamp != imported  # the dataset version the pages cache its questions by: the new ranks load
    with pytest.raises(InputError, match="zz"):
        store.datasets.set_first_stage("demo", {"q2": [("d1", 1, 1.0)], "q1": [("zz", 1, 1.0)]})
    assert store.datasets.dataset_stamp("demo") == stamp  # a refused run changes nothing
    by_id = {c.doc_id: c for c in store.datasets.load_dataset("demo").questions[0].candidates}
    assert (by_id["d3"].first_stage_rank, by_id["d3"].first_stage_score) == (1, 7.0)
    assert (by_id["d1"].first_stage_rank, by_id["d1"].first_stage_score) == (2, 3.5)
    assert store.datasets.load_dataset("demo").questions[1].candidates[0].first_stage_rank is None


def test_delete_dataset_cascades(store: Store) -> None:
    store.datasets.import_dataset(small_dataset())
    store.labels.add_label(store.datasets.find_candidate_id("demo", "q1", "d1"), "alice", 1)
    store.runs.save_run("demo", None, {"q1": {"d1": 1.0}}, {})
    store.datasets.delete_dataset("demo")
    assert store.datasets.dataset_names() == [] and store.runs.runs() == []
    with store.engine.connect() as connection:
        for model in (CandidateRow, LabelRow, RunScoreRow):
            assert connection.execute(select(func.count()).select_from(model)).scalar() == 0
    with pytest.raises(InputError):
        store.datasets.delete_dataset("demo")


# ------------------------------------------------------------------ migration 0002, undo, adjudication


def test_upgrade_from_0001_keeps_labels_and_models(database_url: str) -> None:
    """A store created by revision 0001, with data, upgrades to head and keeps every row."""
    engine = make_engine(database_url)
    try:
        upgrade(engine, "0001")
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO datasets (id, name, source, created_at) VALUES (1, 'old', '', :t)"), {"t": T0})
            connection.execute(text("INSERT INTO questions (id, dataset_id, qid, text, split) VALUES (1, 1, 'q1', 'who?', 'train')"))
            connection.execute(
                text("INSERT INTO candidates (id, question_id, doc_id, text, source, gold_label) VALUES (1, 1, 'd1', 'him', '', 1)")
            )
            for label_id, annotator, value in [(1, "alice", 1), (2, "alice", 3), (3, "bob", 0)]:
                connection.execute(
                    text("INSERT INTO labels (id, candidate_id, annotator, value, created_at) VALUES (:i, 1, :a, :v, :t)"),
                    {"i": label_id, "a": annotator, "v": value, "t": T0},
                )
            connection.execute(
                text(
                    "INSERT INTO model_versions (name, kind, version, training_data, metrics, checkpoint_path,"
                    " created_at, promoted, status) VALUES ('smcnn', 'smcnn', 1, '{}', '{}', '/x.pt', :t, :p, 'ready')"
                ),
                {"t": T0, "p": True},
            )
            assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0001"
    finally:
        engine.dispose()
    store = Store(database_url)  # upgrades to head
    try:
        with store.engine.connect() as connection:
            assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == head_revision()
        assert store.labels.current_labels("old") == {1: {"alice": 3, "bob": 0}}
        assert [h["value"] for h in store.labels.label_history(1)] == [1, 3, 0]
        promoted = store.models.promoted_model("smcnn")  # a version without a dataset: in use for every one
        assert (promoted["version"], promoted["promoted"]) == (1, True)
        assert [(v["version"], v["action"], v["promoted_at"]) for v in store.models.promotion_history("smcnn", "*")] == [
            (1, "migrated", T0)
        ]
        assert store.labels.undo_last("alice") == {"label_id": 2, "candidate_id": 1, "value": 3, "dataset": "old",
                                                   "qid": "q1", "doc_id": "d1"}
        assert store.labels.current_labels("old") == {1: {"alice": 1, "bob": 0}}
    finally:
        store.close()


def test_downgrade_and_upgrade_again(store: Store) -> None:
    store.datasets.import_dataset(small_dataset())
    store.labels.add_label(store.datasets.find_candidate_id("demo", "q1", "d1"), "alice", 2)
    upgrade(store.engine, "head")
    downgrade(store.engine, "0001")
    with store.engine.connect() as connection:
        assert "queue_claims" not in inspect(connection).get_table_names()
    upgrade(store.engine, "head")
    assert store.labels.current_labels("demo") == {store.datasets.find_candidate_id("demo", "q1", "d1"): {"alice": 2}}


def test_undo_retracts_without_losing_history(store: Store, tmp_path: Path) -> None:
    store.datasets.import_dataset(small_dataset())
    first, second = store.datasets.find_candidate_id("demo", "q1", "d1"), store.datasets.find_candidate_id("demo", "q2", "d1")
    store.labels.add_label(first, "alice", 1)
    store.labels.add_label(first, "alice", 2)
    store.labels.add_label(second, "alice", 4)
    store.labels.add_label(first, "bob", 0)

    assert store.labels.undo_last("alice") == {"label_id": 3, "candidate_id": second, "value": 4, "dataset": "demo",
                                               "qid": "q2", "doc_id": "d1"}  # the pair as the pages name it
    assert store.labels.current_labels("demo") == {first: {"alice": 2, "bob": 0}}
    assert store.labels.undo_last("alice", "demo")["value"] == 2  # the previous judgement becomes current
    assert store.labels.current_labels("demo") == {first: {"alice": 1, "bob": 0}}
    assert store.labels.qrels("demo") == {"q1": {"d1": 0}}  # bob's is the latest unretracted label
    store.labels.undo_last("alice")
    assert store.labels.undo_last("alice") is None
    assert store.labels.current_labels("demo") == {first: {"bob": 0}}
    assert store.datasets.dataset_summary("demo")["labelled"] == 1

    history = store.labels.label_history(first)
    assert [(h["annotator"], h["value"], h["retracted_at"] is not None) for h in history] == [
        ("alice", 1, True),
        ("alice", 2, True),
        ("bob", 0, False),
    ]
    path = tmp_path / "labels.jsonl"
    assert store.labels.export_labels_jsonl("demo", path) == 4
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["retracted_at"] is not None for r in records] == [True, True, True, False]
    with store.engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(LabelRow)).scalar() == 4
    with pytest.raises(InputError):
        store.labels.undo_last("  ")


def test_adjudications_and_replace_carry_work_over(store: Store) -> None:
    store.datasets.import_dataset(small_dataset())
    candidate = store.datasets.find_candidate_id("demo", "q1", "d2")
    store.labels.add_label(candidate, "alice", 1)
    store.labels.add_label(candidate, "alice", 3)
    store.labels.add_label(candidate, "bob", 0)
    store.labels.undo_last("alice")
    store.labels.adjudicate(candidate, 2, "carol", note="partly answers")
    store.labels.adjudicate(candidate, 1, "carol")
    assert store.labels.adjudications("demo")[candidate]["value"] == 1  # the latest wins
    with pytest.raises(InputError):
        store.labels.adjudicate(candidate, 7, "carol")
    with pytest.raises(InputError):
        store.labels.adjudicate(candidate + 1000, 1, "carol")

    store.datasets.import_dataset(small_dataset(), replace=True)
    new_id = store.datasets.find_candidate_id("demo", "q1", "d2")
    assert [(h["annotator"], h["value"], h["retracted_at"] is not None) for h in store.labels.label_history(new_id)] == [
        ("alice", 1, False),
        ("alice", 3, True),
        ("bob", 0, False),
    ]
    assert store.labels.current_labels("demo") == {new_id: {"alice": 1, "bob": 0}}
    adjudication = store.labels.adjudications("demo")[new_id]
    assert (adjudication["value"], adjudication["adjudicator"]) == (1, "carol")


def test_rollback_promotes_the_previously_promoted_version(store: Store) -> None:
    for version in (1, 2, 3):
        store.models.register_model("smcnn", NewVersion("smcnn", model_file(f"{version}.pt"), {"dataset": "demo"}, {"dev_map": version / 10}))
    with pytest.raises(InputError, match="no earlier version promoted"):
        store.models.rollback("smcnn", "demo")
    assert store.models.rollback_target("smcnn", "demo") is None
    store.models.promote("smcnn", 1, "demo")
    assert store.models.rollback_target("smcnn", "demo") is None, "the only version ever promoted is the current one"
    store.models.promote("smcnn", 3, "demo")
    assert store.models.rollback_target("smcnn", "demo")["version"] == 1
    assert store.models.rollback("smcnn", "demo")["version"] == 1  # not 2, which was never promoted
    assert store.models.promoted_model("smcnn", "demo")["version"] == 1
    assert store.models.rollback_target("smcnn", "demo") is None  # a roll back is not undone by the next one
    store.models.promote("smcnn", 2, "demo")
    store.models.promote("smcnn", 3, "demo")
    assert store.models.rollback("smcnn", "demo")["version"] == 2
    assert store.models.rollback_target("smcnn", "demo")["version"] == 1  # back through the promotions, one by one
    store.models.promote("smcnn", 3, "demo")
    assert [v["promoted_for"] for v in store.models.model_versions("smcnn")] == [[], [], ["demo"]]
    version_id = store.models.promoted_model("smcnn", "demo")["id"]
    assert store.models.model_version(version_id)["checkpoint_path"] == model_file("3.pt")
    with pytest.raises(InputError):
        store.models.model_version(version_id + 100)

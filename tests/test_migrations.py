"""Migrations on real databases with real rows: down to 0001 and back up loses nothing (SQLite
re-creates tables in batch mode, which under enforced foreign keys used to run their ON DELETE
actions), a store upgraded from 0001 can roll back to the version promoted before, and a
downgrade that would have to drop kept labels is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from db.base import NewVersion
from db.models import LabelRow, RunRow
from db.session import downgrade, make_engine, upgrade
from db.store import Store
from qa_core.types import Candidate, Dataset, Question
from tests import ROOT
from tests.conftest import head_revision, model_file

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def populated(store: Store) -> tuple[int, int]:
    """A dataset with labels, a registered version and a run that names it; (version id, run id)."""
    store.datasets.import_dataset(Dataset("d", [Question("q1", "who?", [Candidate("a", "him", label=1), Candidate("b", "her")])]))
    candidate = store.datasets.find_candidate_id("d", "q1", "a")
    store.labels.add_label(candidate, "alice", 2)
    store.labels.add_label(candidate, "bob", 1)
    version_id = store.models.register_model("smcnn", NewVersion("smcnn", model_file("m.pt"), {}, {"dev_map": 0.5}, promote=True))
    run_id = store.runs.save_run("d", None, {"q1": {"a": 1.0, "b": 0.5}}, {"map": 1.0}, model_version_id=version_id)
    return version_id, run_id


def counts(store: Store) -> tuple[int, int | None]:
    with store.session_scope() as session:
        return (
            session.scalar(select(func.count()).select_from(LabelRow)),
            session.scalar(select(RunRow.model_version_id)),
        )


def test_down_to_0001_and_back_keeps_every_row(store: Store) -> None:
    version_id, run_id = populated(store)
    downgrade(store.engine, "0001")
    with store.engine.connect() as connection:
        assert connection.execute(text("SELECT model_version_id FROM runs")).scalar() == version_id
        assert connection.execute(text("SELECT COUNT(*) FROM labels")).scalar() == 2
    upgrade(store.engine, "head")
    assert counts(store) == (2, version_id)
    assert store.runs.runs()[0]["model"] == "smcnn" and store.runs.load_run(run_id) == {"q1": {"a": 1.0, "b": 0.5}}


def test_the_alembic_command_keeps_every_row_too(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store = Store(url)
    version_id, _ = populated(store)
    store.close()
    env = {**os.environ, "RERANK_LAB_DB": url, "RERANK_LAB_DATA": str(tmp_path / "data")}
    for step in (["downgrade", "0001"], ["upgrade", "head"]):
        subprocess.run([sys.executable, "-m", "alembic", "-c", "db/alembic.ini", *step], cwd=ROOT, env=env, check=True, capture_output=True)
    store = Store(url)
    try:
        assert counts(store) == (2, version_id)
    finally:
        store.close()


def test_a_store_upgraded_from_0001_rolls_back_to_the_version_promoted_before(database_url: str) -> None:
    engine = make_engine(database_url)
    try:
        upgrade(engine, "0001")
        with engine.begin() as connection:
            for version, promoted in ((1, False), (2, True), (3, False)):
                connection.execute(
                    text(
                        "INSERT INTO model_versions (name, kind, version, training_data, metrics, checkpoint_path,"
                        " created_at, promoted, status) VALUES ('smcnn', 'smcnn', :v, '{}', '{}', :p, :t, :pr, 'ready')"
                    ),
                    {"v": version, "p": f"/v{version}.pt", "t": T0, "pr": promoted},
                )
    finally:
        engine.dispose()
    store = Store(database_url)  # upgrades to head
    try:  # versions without a training dataset serve every dataset: scope "*"
        store.models.promote("smcnn", 3, "*")
        assert store.models.rollback_target("smcnn", "*")["version"] == 2
        assert store.models.rollback("smcnn", "*")["version"] == 2
        assert store.models.promoted_model("smcnn")["checkpoint_path"] == "/v2.pt"
    finally:
        store.close()


def test_promotions_become_per_dataset_without_changing_what_any_page_uses(database_url: str) -> None:
    """Revision 0005: the one promoted version of a name stays in use for every dataset (now said
    so per dataset), and roll back within a dataset returns to the version promoted before it."""
    engine = make_engine(database_url)
    try:
        upgrade(engine, "0004")
        with engine.begin() as connection:
            for name in ("wikiqa", "trecqa"):
                connection.execute(text("INSERT INTO datasets (name, source, created_at) VALUES (:n, '', :t)"),
                                   {"n": name, "t": T0})
            rows = [  # (name, version, trained on, promoted now, promoted at)
                ("smcnn", 1, "wikiqa", False, T0), ("smcnn", 2, "trecqa", True, T0 + timedelta(hours=1)),
                ("smcnn", 3, "wikiqa", False, None), ("question_class", 1, None, True, T0),
            ]
            for name, version, trained_on, promoted, at in rows:
                data = json.dumps({"dataset": trained_on} if trained_on else {"path": "x"})
                connection.execute(
                    text(
                        "INSERT INTO model_versions (name, kind, version, training_data, metrics, checkpoint_path,"
                        " created_at, promoted, promoted_at, status)"
                        " VALUES (:n, :n, :v, :d, '{}', :p, :t, :pr, :at, 'ready')"
                    ),
                    {"n": name, "v": version, "d": data, "p": f"/{name}{version}.pt", "t": T0, "pr": promoted, "at": at},
                )
    finally:
        engine.dispose()
    store = Store(database_url)  # upgrades to head
    try:
        for dataset in ("wikiqa", "trecqa"):
            in_use = store.models.promoted_model("smcnn", dataset)
            assert (in_use["version"], in_use["promoted"]) == (2, True), "what every page used before"
            assert store.models.rollback_target("smcnn", dataset)["version"] == 1
        assert store.models.promoted_model("question_class")["version"] == 1
        assert [v["action"] for v in store.models.promotion_history("smcnn", "wikiqa")] == ["migrated", "migrated"]
        store.models.rollback("smcnn", "wikiqa")  # only wikiqa's pages move back
        assert store.models.promoted_model("smcnn", "wikiqa")["version"] == 1
        assert store.models.promoted_model("smcnn", "trecqa")["version"] == 2
    finally:
        store.close()


def test_a_downgrade_that_would_drop_kept_labels_is_refused(store: Store) -> None:
    populated(store)
    store.datasets.import_dataset(Dataset("d", [Question("q1", "who?", [Candidate("b", "her")])]), replace=True)
    assert len(store.labels.orphaned_labels("d")) == 2
    with pytest.raises(RuntimeError, match="retired"):
        downgrade(store.engine, "0002")
    with store.engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == head_revision()
    assert counts(store)[0] == 2


def test_a_store_that_numbered_typed_events_0003_gets_candidate_identity(database_url: str) -> None:
    """Stores written between 659fa87 and 8df82d0 (2026-11-23) have typed training events stamped
    0003, the number candidate identity took later: upgrading them applies what they lack."""
    engine = make_engine(database_url)
    try:
        upgrade(engine, "0002")
        with engine.begin() as connection:  # the typed events as 659fa87's revision 0003 made them
            connection.execute(text("ALTER TABLE training_events RENAME COLUMN epoch TO step"))
            for column, kind in (("total", "INTEGER"), ("unit", "TEXT NOT NULL DEFAULT 'epoch'"), ("detail", "JSON")):
                connection.execute(text(f"ALTER TABLE training_events ADD COLUMN {column} {kind}"))
            connection.execute(text("UPDATE alembic_version SET version_num = '0003'"))
    finally:
        engine.dispose()
    store = Store(database_url)  # upgrades to head
    try:
        store.datasets.import_dataset(Dataset("d", [Question("q1", "who?", [Candidate("a", "him", label=1)])]))
        store.datasets.import_dataset(Dataset("d", [Question("q1", "who?", [Candidate("b", "her"), Candidate("a", "him", label=1)])]),
                             replace=True)  # content identity: the candidate keeps its row
        assert store.store_id and sorted(r.doc_id for r in store.datasets.candidate_rows("d")) == ["a", "b"]
        with store.engine.connect() as connection:
            assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == head_revision()
    finally:
        store.close()

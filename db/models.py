"""SQLAlchemy 2 ORM models of the store.

Migrations ``0001_initial`` to ``0003_typed_training_events`` create exactly these tables;
``tests/test_store.py`` checks that the two agree, so any change here needs a new Alembic revision.

History is append-only wherever people's work is recorded: a judgement is never updated or
deleted (undo appends a ``label_retractions`` row), adjudications and queue claims are new rows,
and a training job's progress is a stream of ``training_events``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Double,
    ForeignKey,
    Index,
    MetaData,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

# Named constraints let SQLite batch migrations (render_as_batch) drop or alter them later.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC timestamps on every back end (SQLite stores them without a zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; the store keeps timezone-aware UTC times")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON(), float: Double()}


class DatasetRow(Base):
    __tablename__ = "datasets"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(unique=True)
    source: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class QuestionRow(Base):
    __tablename__ = "questions"
    __table_args__ = (UniqueConstraint("dataset_id", "qid"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    qid: Mapped[str]
    text: Mapped[str] = mapped_column(Text)
    split: Mapped[str]


class CandidateRow(Base):
    __tablename__ = "candidates"
    __table_args__ = (UniqueConstraint("question_id", "doc_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id", ondelete="CASCADE"))
    doc_id: Mapped[str]
    text: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text, default="")
    url: Mapped[str | None] = mapped_column(Text)
    first_stage_rank: Mapped[int | None]
    first_stage_score: Mapped[float | None]
    gold_label: Mapped[int | None]


class LabelRow(Base):
    """Append-only: a new judgement is a new row; an annotator's current one is their latest
    (highest id) that has no retraction."""

    __tablename__ = "labels"
    # (annotator, id): an annotator's latest judgement, for undo.
    __table_args__ = (Index(None, "candidate_id", "annotator"), Index(None, "annotator", "id"))

    id: Mapped[int] = mapped_column(primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id", ondelete="CASCADE"))
    annotator: Mapped[str]
    value: Mapped[int]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    note: Mapped[str | None] = mapped_column(Text)


class LabelRetractionRow(Base):
    """Undo of one judgement: the label row stays, this row says it no longer counts."""

    __tablename__ = "label_retractions"

    id: Mapped[int] = mapped_column(primary_key=True)
    label_id: Mapped[int] = mapped_column(ForeignKey("labels.id", ondelete="CASCADE"), unique=True)
    annotator: Mapped[str]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class AdjudicationRow(Base):
    """A reviewer's final value for a candidate; the latest one (highest id) wins over every label."""

    __tablename__ = "adjudications"

    id: Mapped[int] = mapped_column(primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id", ondelete="CASCADE"), index=True)
    value: Mapped[int]
    adjudicator: Mapped[str]
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class QueueClaimRow(Base):
    """A lease on a candidate handed out by the labelling queue to one app session (``holder``).

    Open while ``ended_at`` is NULL; ``outcome`` says how it ended (labelled, skipped, released,
    expired). The database keeps at most one open claim per candidate (partial unique index
    below), so two sessions can never hold the same pair at once, on any back end.
    """

    __tablename__ = "queue_claims"

    id: Mapped[int] = mapped_column(primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id", ondelete="CASCADE"), index=True)
    annotator: Mapped[str] = mapped_column(index=True)
    holder: Mapped[str] = mapped_column(index=True)
    claimed_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
    outcome: Mapped[str | None]


Index(
    "uq_queue_claims_open_candidate_id",
    QueueClaimRow.candidate_id,
    unique=True,
    sqlite_where=QueueClaimRow.ended_at.is_(None),
    postgresql_where=QueueClaimRow.ended_at.is_(None),
)


class ModelVersionRow(Base):
    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]
    kind: Mapped[str]
    version: Mapped[int]
    training_data: Mapped[dict[str, Any]]
    metrics: Mapped[dict[str, Any]]
    checkpoint_path: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    promoted: Mapped[bool] = mapped_column(default=False)
    status: Mapped[str] = mapped_column(default="ready")
    # When it was last promoted: roll back promotes the most recently promoted other version.
    promoted_at: Mapped[datetime | None]


# At most one promoted version per name, enforced by the database itself (partial unique index).
Index(
    "uq_model_versions_promoted_name",
    ModelVersionRow.name,
    unique=True,
    sqlite_where=ModelVersionRow.promoted,
    postgresql_where=ModelVersionRow.promoted,
)


class RunRow(Base):
    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    model_version_id: Mapped[int | None] = mapped_column(
        ForeignKey("model_versions.id", ondelete="SET NULL"), index=True
    )
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    split: Mapped[str | None]
    tag: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    metrics: Mapped[dict[str, Any]]


class RunScoreRow(Base):
    __tablename__ = "run_scores"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    candidate_id: Mapped[int] = mapped_column(
        ForeignKey("candidates.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    score: Mapped[float]
    rank: Mapped[int]


class TrainingJobRow(Base):
    """A training run in its own OS process (``qa_core.services.jobs``): queued, running, succeeded or failed.

    ``params`` holds everything the process needs (model, labels, seed, config); ``pid``/``host``
    and ``heartbeat_at`` let a reader notice a process that died without saying so.
    """

    __tablename__ = "training_jobs"

    id: Mapped[int] = mapped_column(primary_key=True)
    model: Mapped[str]
    dataset: Mapped[str]
    params: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(default="queued", index=True)
    phase: Mapped[str] = mapped_column(Text, default="")
    pid: Mapped[int | None]
    host: Mapped[str | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    heartbeat_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    model_version_id: Mapped[int | None] = mapped_column(
        ForeignKey("model_versions.id", ondelete="SET NULL"), index=True
    )


class TrainingEventRow(Base):
    """One progress point of a job: a ``qa_core.training.events.TrainingEvent`` as it came."""

    __tablename__ = "training_events"
    __table_args__ = (Index(None, "job_id", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("training_jobs.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    step: Mapped[int | None]
    total: Mapped[int | None]
    unit: Mapped[str] = mapped_column(Text, default="epoch", server_default="epoch")
    batch: Mapped[int | None]
    loss: Mapped[float | None]
    dev_map: Mapped[float | None]
    detail: Mapped[dict[str, Any] | None]

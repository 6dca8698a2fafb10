"""SQLAlchemy 2 ORM models of the store.

Migrations ``0001_initial`` to ``0011_systems`` create exactly these tables;
``tests/test_store.py`` checks that the two agree, so any change here needs a new Alembic revision.

History is append-only wherever people's work is recorded: a judgement is never updated or
deleted (undo appends a ``label_retractions`` row), adjudications and queue claims are new rows,
and a training job's progress is a stream of ``training_events``. A re-import never deletes a
question or candidate either: one that left the file is marked ``retired_at`` and keeps its
labels (``db/reimport.py``), so a label row always has its candidate.
"""

from __future__ import annotations

import uuid
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


def new_store_id() -> str:
    """A random store id (migration 0003 keeps its own copy of this rule: migrations are frozen)."""
    return uuid.uuid4().hex[:12]


class StoreInfoRow(Base):
    """Facts about the store itself; ``store_id`` (random, made with the store) marks the
    checkpoint files this store writes, so stores sharing a data folder never overwrite or
    clean up each other's (``qa_core.checkpoints``)."""

    __tablename__ = "store_info"

    key: Mapped[str] = mapped_column(primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class DatasetRow(Base):
    __tablename__ = "datasets"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(unique=True)
    source: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)  # of the current content: set by every import


class QuestionRow(Base):
    """A question; ``retired_at`` is set when a re-import no longer holds it (kept for its labels)."""

    __tablename__ = "questions"

    id: Mapped[int] = mapped_column(primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    qid: Mapped[str]
    text: Mapped[str] = mapped_column(Text)
    split: Mapped[str]
    position: Mapped[int | None]  # in the file last imported (NULL before migration 0003: order by id)
    retired_at: Mapped[datetime | None]


# A qid names one current question of a dataset; retired ones may repeat it.
Index(
    "uq_questions_active_qid",
    QuestionRow.dataset_id,
    QuestionRow.qid,
    unique=True,
    sqlite_where=QuestionRow.retired_at.is_(None),
    postgresql_where=QuestionRow.retired_at.is_(None),
)


class CandidateRow(Base):
    """A candidate of a question. ``match_key`` is its identity across re-imports (a hash of its
    explicit (qid, doc_id), or of question and candidate text when the file had no ids; NULL for
    rows from before migration 0003); ``retired_at`` is set when a re-import no longer holds it."""

    __tablename__ = "candidates"

    id: Mapped[int] = mapped_column(primary_key=True)
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id", ondelete="CASCADE"), index=True)
    doc_id: Mapped[str]
    text: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text, default="")
    url: Mapped[str | None] = mapped_column(Text)
    first_stage_rank: Mapped[int | None]
    first_stage_score: Mapped[float | None]
    gold_label: Mapped[int | None]
    match_key: Mapped[str | None]
    position: Mapped[int | None]  # in the file last imported (NULL before migration 0003: order by id)
    retired_at: Mapped[datetime | None]
    # set when a re-import changed the text under the same (qid, doc_id): its labels stay, and those
    # older than this judged the earlier text (``LabelStore.orphaned_labels`` lists them)
    text_edited_at: Mapped[datetime | None]


Index(
    "uq_candidates_active_doc_id",
    CandidateRow.question_id,
    CandidateRow.doc_id,
    unique=True,
    sqlite_where=CandidateRow.retired_at.is_(None),
    postgresql_where=CandidateRow.retired_at.is_(None),
)


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
    # The signed-in user who wrote it (team mode, revision 0006); NULL in local mode and before.
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), index=True)
    # The queue claim the label was given under (its holder: whose undo it is; its claimed_at:
    # when the pair was shown), and the guidelines it was made under; NULL for labels written
    # outside the queue or before migration 0008.
    claim_id: Mapped[int | None] = mapped_column(ForeignKey("queue_claims.id", ondelete="SET NULL"), index=True)
    guideline_id: Mapped[int | None] = mapped_column(ForeignKey("guidelines.id", ondelete="SET NULL"))


class GuidelineRow(Base):
    """One version of a dataset's annotation guidelines (markdown); append-only, the highest
    version is the one in force."""

    __tablename__ = "guidelines"
    __table_args__ = (UniqueConstraint("dataset_id", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    version: Mapped[int]
    text: Mapped[str] = mapped_column(Text)
    author: Mapped[str]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class AnnotationSettingsRow(Base):
    """A dataset's labelling settings as set on the Label page; append-only, the latest row wins
    (so every session of every annotator draws the same double-annotated sample)."""

    __tablename__ = "annotation_settings"

    id: Mapped[int] = mapped_column(primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    overlap_share: Mapped[float]  # share of pairs that want ``overlap`` annotators
    overlap: Mapped[int]
    changed_by: Mapped[str]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class CalibrationSettingsRow(Base):
    """Whether a dataset calibrates new annotators on gold pairs, and on how many; append-only,
    the latest row wins (a calibration run keeps the row it started under)."""

    __tablename__ = "calibration_settings"

    id: Mapped[int] = mapped_column(primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    enabled: Mapped[bool]
    pairs: Mapped[int]
    changed_by: Mapped[str]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class CalibrationJudgementRow(Base):
    """One grade an annotator gave a gold pair during calibration, with the gold label it is
    compared with as it was then; never a training label, never in the agreement between
    annotators. One per (pair, annotator): a second tab's late press does not overwrite the first."""

    __tablename__ = "calibration_judgements"
    __table_args__ = (UniqueConstraint("candidate_id", "annotator"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    settings_id: Mapped[int] = mapped_column(ForeignKey("calibration_settings.id", ondelete="CASCADE"))
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id", ondelete="CASCADE"))
    annotator: Mapped[str] = mapped_column(index=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), index=True)
    holder: Mapped[str | None]
    value: Mapped[int]
    gold: Mapped[int]
    guideline_id: Mapped[int | None] = mapped_column(ForeignKey("guidelines.id", ondelete="SET NULL"))
    shown_at: Mapped[datetime]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class PreferenceJudgementRow(Base):
    """One relative judgement of a question's candidates (issue 21, item 2), append-only like a
    label: ``pairwise`` shows two (``shown`` = [left, right]) and ``outcome`` is left, right, tie or
    both_bad; ``topk`` shows a pool and ``picked`` holds the chosen candidate ids best first (empty:
    none fits). ``holder`` is the app session it came from (whose undo it is)."""

    __tablename__ = "preference_judgements"

    id: Mapped[int] = mapped_column(primary_key=True)
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id", ondelete="CASCADE"), index=True)
    mode: Mapped[str]
    shown: Mapped[list[int]] = mapped_column(JSON)
    outcome: Mapped[str]
    picked: Mapped[list[int]] = mapped_column(JSON)
    annotator: Mapped[str] = mapped_column(index=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), index=True)
    holder: Mapped[str | None]
    guideline_id: Mapped[int | None] = mapped_column(ForeignKey("guidelines.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class PreferenceRetractionRow(Base):
    """Undo of a preference judgement: the judgement stays, marked retracted."""

    __tablename__ = "preference_retractions"

    id: Mapped[int] = mapped_column(primary_key=True)
    judgement_id: Mapped[int] = mapped_column(
        ForeignKey("preference_judgements.id", ondelete="CASCADE"), unique=True
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


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
    """A trained model, versioned per name. Which version a dataset's pages use is a promotion
    (``ModelPromotionRow``), not a property of the version."""

    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]
    kind: Mapped[str]
    version: Mapped[int]
    training_data: Mapped[dict[str, Any]]
    metrics: Mapped[dict[str, Any]]
    checkpoint_path: Mapped[str] = mapped_column(Text)
    checkpoint_sha256: Mapped[str | None]  # of the file registered; None before migration 0010
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    status: Mapped[str] = mapped_column(default="ready")


class ModelPromotionRow(Base):
    """Append-only: from ``promoted_at`` on, model ``name`` means version ``version_id`` for
    ``scope``, a dataset name (rankers: a model trained on one dataset is promoted for it, or
    explicitly for another) or ``*`` (models that serve every dataset: the question classifiers).
    The latest row per (name, scope) is in use; the rows before it are the roll-back history.
    ``action`` says how the row came: "promote", "rollback" or "migrated" (revision 0005)."""

    __tablename__ = "model_promotions"
    __table_args__ = (Index(None, "name", "scope", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]
    scope: Mapped[str]
    version_id: Mapped[int] = mapped_column(ForeignKey("model_versions.id", ondelete="CASCADE"), index=True)
    action: Mapped[str] = mapped_column(default="promote")
    promoted_at: Mapped[datetime] = mapped_column(default=utcnow)


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
    and ``heartbeat_at`` let a reader notice a process that died without saying so. ``runner``:
    ``process`` (the launcher starts one) or ``worker`` (``python -m qa_core worker`` claims it);
    ``claim`` is the token of the attempt that holds a running job and ``lease_until`` when its
    lease ends unless a heartbeat renews it (``db/jobs.py``).
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
    runner: Mapped[str] = mapped_column(Text, default="process", server_default="process")
    claim: Mapped[str | None] = mapped_column(Text)
    lease_until: Mapped[datetime | None]
    attempts: Mapped[int] = mapped_column(default=0, server_default="0")


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


class UserRow(Base):
    """A person who signed in through an identity provider (team mode), keyed by the provider's
    ``issuer`` and ``subject`` (stable, unlike email and display name, which are refreshed at every
    sign-in and only shown). ``name`` is what their labels, claims and audit rows are recorded
    under, fixed at the first sign-in and unique: their email unless another user had it.
    ``role`` is one of ``qa_core.access.Role``; ``signed_out_at`` ends every sign-in issued before
    it (a copied cookie replayed after signing out is refused); ``merged_into``: an admin merged
    this identity into that user, who it signs in as."""

    __tablename__ = "users"
    __table_args__ = (UniqueConstraint("issuer", "subject"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    issuer: Mapped[str] = mapped_column(default="", server_default="")
    subject: Mapped[str]
    name: Mapped[str] = mapped_column(unique=True)
    merged_into: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    email: Mapped[str | None] = mapped_column(index=True)
    display_name: Mapped[str | None] = mapped_column(Text)
    role: Mapped[str] = mapped_column(default="annotator")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_sign_in_at: Mapped[datetime | None]
    signed_out_at: Mapped[datetime | None]


class AuditEventRow(Base):
    """Append-only: who (``actor``: a user's email, ``cli:<os user>``, ``local``, ``system``) did
    what (``action``: import, promote, rollback, adjudicate, train, role_change, ...) to what
    (``target``) and when, written in the same transaction as the action itself."""

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    actor: Mapped[str]
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), index=True)
    action: Mapped[str] = mapped_column(index=True)
    target: Mapped[str] = mapped_column(Text, default="")
    detail: Mapped[dict[str, Any] | None]


class SystemRow(Base):
    """An external system (issue 36): a named ranking source that is not a model of this project.
    ``kind`` "run": a stored run for ``dataset_id`` (``scores``: ``{qid: {doc_id: score}}``, the
    file's name and SHA-256 kept as provenance); "service": an HTTP scoring endpoint at ``url``
    (``info``: what its ``GET /info`` said when added, if anything) that scores any dataset.
    ``added_by``/``user_id``: who added it. Removing a system deletes this row only: labels never
    point here."""

    __tablename__ = "systems"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(unique=True)
    kind: Mapped[str]
    dataset_id: Mapped[int | None] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    url: Mapped[str | None] = mapped_column(Text)
    file_name: Mapped[str | None] = mapped_column(Text)
    file_sha256: Mapped[str | None]
    info: Mapped[dict[str, Any] | None]
    scores: Mapped[dict[str, Any] | None]
    added_by: Mapped[str]
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    added_at: Mapped[datetime] = mapped_column(default=utcnow)

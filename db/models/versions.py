"""The models context's tables: registered versions, their promotions, training jobs and their
progress events."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, utcnow


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
    # Who queued it (``access.Actor``'s name, kind and users-table row): the job registers and
    # promotes as them, with the role they hold when it finishes (None: queued before revision 0012).
    created_by: Mapped[str | None] = mapped_column(Text)
    created_by_kind: Mapped[str | None] = mapped_column(Text)
    created_by_user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))


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

"""The labelling and annotation context's tables: labels and their retractions, adjudications,
the queue's claims, guidelines, labelling and calibration settings, calibration and preference
judgements."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, ForeignKey, Index, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, unique_while_null, utcnow


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


unique_while_null("uq_queue_claims_open_candidate_id", QueueClaimRow.candidate_id, null=QueueClaimRow.ended_at)


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

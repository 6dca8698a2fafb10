"""The datasets context's tables: the store itself, datasets, their questions and candidates."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, unique_while_null, utcnow


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
unique_while_null("uq_questions_active_qid", QuestionRow.dataset_id, QuestionRow.qid, null=QuestionRow.retired_at)


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


# A doc_id names one current candidate of a question.
unique_while_null(
    "uq_candidates_active_doc_id", CandidateRow.question_id, CandidateRow.doc_id, null=CandidateRow.retired_at
)

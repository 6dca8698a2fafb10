"""The external systems context's table."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, utcnow


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

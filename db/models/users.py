"""The users context's tables: people who signed in, and the audit trail."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, utcnow


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


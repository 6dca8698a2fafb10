"""Users, roles and the audit trail in the store (mixed into ``db.store.Store``).

A person enters the users table at their first sign-in (team mode), keyed by the identity
provider's issuer and subject (the email is only shown: a second subject that brings a known
email is another person, whom the admin may merge into the first, ``merge_users``); the first one on a store without users becomes admin, everyone after starts as
annotator until an admin (the Audit page, or ``python -m qa_core users grant EMAIL ROLE``) changes
it. Which of two simultaneous first sign-ins becomes admin is decided by the database: both try to
insert the ``first_admin`` row of ``store_info``, and its primary key lets one through.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import Session

from db.audit import SIGN_IN_AGAIN, active_admins, authorize, current_user, ended_by_sign_out, final_user, record
from db.base import StoreBase, check_name, check_text, now, row_dict
from db.models import AuditEventRow, LabelRow, QueueClaimRow, StoreInfoRow, UserRow
from qa_core.access import SYSTEM, AccessDenied, Actor, Permission, Role, parse_role, require
from qa_core.types import InputError

FIRST_ADMIN_KEY = "first_admin"
SIGN_IN_ATTEMPTS = 3  # two first sign-ins of one subject race on its unique constraint
AUDIT_KEYS = ("id", "at", "actor", "action", "target", "detail")


class UserStore(StoreBase):
    """Sign-in, sign-out, roles and the audit trail."""

    def sign_in(
        self,
        subject: str,
        email: str | None,
        display_name: str | None,
        *,
        issued_at: datetime,
        expires_at: datetime,
        issuer: str = "",
    ) -> Actor:
        """The signed-in user of an identity token (its ``iss``, ``sub``, ``email``, ``name``,
        ``iat``, ``exp``): created at the first sign-in of (issuer, subject) (admin on a store
        without users, annotator otherwise), email and display name refreshed afterwards. A user
        from before issuers were recorded (issuer ``""``) is adopted by the first issuer that signs
        its subject in. ``AccessDenied`` for an expired token or one issued before the user's last
        sign-out."""
        issuer = check_name(issuer, "the sign-in's issuer") if issuer else ""
        subject = check_name(subject, "the sign-in's subject")
        email = check_name(email, "the sign-in's email") if email else None
        display_name = check_text(display_name, "the sign-in's name")
        probe = Actor(email or subject, Role.ANNOTATOR, subject=subject, signed_in_at=issued_at, expires_at=expires_at)
        require(probe, Permission.VIEW, now())  # an expired token goes no further
        def sign_in(session: Session) -> Actor:
            identity = _identity(session, issuer, subject)
            if identity is None:
                row = self._new_user(session, issuer, subject, email, display_name)
            else:
                row = final_user(session, identity)
                if ended_by_sign_out(issued_at, row.signed_out_at):
                    raise AccessDenied(
                        f"{row.name} signed out at {row.signed_out_at:%Y-%m-%d %H:%M:%S} UTC after "
                        f"this sign-in was issued; {SIGN_IN_AGAIN}"
                    )
                if row is identity:
                    row.email, row.display_name = email or row.email, display_name or row.display_name
            row.last_sign_in_at = now()
            session.flush()
            return _actor(row, issued_at, expires_at)

        return self.retrying(sign_in, SIGN_IN_ATTEMPTS)

    @staticmethod
    def _new_user(session: Session, issuer: str, subject: str, email: str | None, display_name: str | None) -> UserRow:
        role = Role.ANNOTATOR
        if session.scalar(select(func.count()).select_from(UserRow)) == 0:
            # A simultaneous first sign-in that wins makes this insert fail: ``sign_in`` tries
            # again, and then finds a user, so this one starts as annotator.
            session.execute(insert(StoreInfoRow).values(key=FIRST_ADMIN_KEY, value=subject))
            role = Role.ADMIN
        name = email or subject
        same_name = session.scalar(select(func.count()).select_from(UserRow).where(func.lower(UserRow.name) == name.lower()))
        row = UserRow(issuer=issuer, subject=subject, name=f"{name} #new {issuer} {subject}" if same_name else name,
                      email=email, display_name=display_name, role=role.value, created_at=now())
        session.add(row)
        session.flush()
        if same_name:  # its id tells it apart, as migration 0010 named the users it found so
            row.name = f"{name} #{row.id}"
            session.flush()
        reason = "the first user of this store" if role is Role.ADMIN else "new users start as annotators"
        detail = {"user_id": row.id, "role": role.value, "reason": reason, "issuer": issuer, "subject": subject}
        if same_name:
            detail["note"] = f"another user signed in with {name} before: a different person until an admin merges them"
        record(session, SYSTEM, "user_created", row.name, detail)
        return row

    def user_actor(self, actor: Actor) -> Actor:
        """A signed-in ``actor`` checked again (still known, not signed out, not expired) with its
        current role: what every page run does before it shows anything."""
        with self.session_scope() as session:
            return require(current_user(session, actor), Permission.VIEW, now())

    def sign_out(self, actor: Actor) -> None:
        """End every sign-in of ``actor``'s user issued until now (this browser's and any copied cookie)."""
        if not actor.signed_in:
            return
        with self.session_scope() as session:
            current = current_user(session, actor)
            session.execute(update(UserRow).where(UserRow.id == current.user_id).values(signed_out_at=now()))
            record(session, current, "sign_out", current.name)

    def grant_role(self, who: str, role: Role | str, *, actor: Actor | None = None) -> dict[str, Any]:
        """Give the user ``who`` (an email, or a subject) ``role``; only an admin may, and the last
        admin cannot step down. Returns the user as ``users`` lists them."""
        new_role = parse_role(str(role))
        who = check_name(who, "the user's email")
        with self.session_scope() as session:
            actor = authorize(session, actor, Permission.MANAGE_ROLES, team=self.team)
            rows = list(session.scalars(select(UserRow).where(UserRow.name == who)))
            if not rows:
                rows = list(session.scalars(select(UserRow).where(func.lower(UserRow.email) == who.lower())))
            if not rows:
                rows = list(session.scalars(select(UserRow).where(UserRow.subject == who)))
            if not rows:
                raise InputError(
                    f"no user {who!r} has signed in yet; ask them to sign in once (they start as annotator), "
                    "then grant the role"
                )
            if len(rows) > 1:
                subjects = ", ".join(row.subject for row in rows)
                raise InputError(f"{len(rows)} users have the email {who!r}; name one as it is recorded "
                                 f"({', '.join(row.name for row in rows)}) or by its subject: {subjects}")
            row = rows[0]
            previous = row.role
            if previous == Role.ADMIN and new_role is not Role.ADMIN:
                if active_admins(session) <= 1:
                    raise InputError(f"{row.email or row.subject} is the last admin; make someone else admin first")
            if previous != new_role.value:
                row.role = new_role.value
                record(session, actor, "role_change", row.email or row.subject,
                       {"user_id": row.id, "from": previous, "to": new_role.value})
            session.flush()
            return _user_dict(row)

    def merge_users(self, keep: int, merge: int, *, actor: Actor | None = None) -> dict[str, Any]:
        """Make user ``merge`` (an id, as ``users`` lists them) one person with user ``keep``: their
        identity (and those merged into ``merge`` before) signs in as ``keep`` from now on, their
        live sign-ins end, and their labels and claims become ``keep``'s; the last admin cannot be
        merged into a user who is not admin.
        Only an admin may, deliberately: one email under two subjects is never merged by itself.
        Returns the kept user."""
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.MANAGE_ROLES, team=self.team)
            kept, merged = session.get(UserRow, keep), session.get(UserRow, merge)
            for user_id, row in ((keep, kept), (merge, merged)):
                if row is None:
                    raise InputError(f"no user with id {user_id}")
                if row.merged_into is not None:
                    raise InputError(f"user {row.name} was merged into user {row.merged_into} already")
            if keep == merge:
                raise InputError("a user cannot be merged into themselves")
            if merged.role == Role.ADMIN.value and kept.role != Role.ADMIN.value and active_admins(session) <= 1:
                raise InputError(f"{merged.email or merged.subject} is the last admin; make {kept.name} admin first, "
                                 "or someone else")
            merged.merged_into = kept.id
            # Those merged into ``merged`` before sign in as ``kept`` too.
            session.execute(update(UserRow).where(UserRow.merged_into == merged.id).values(merged_into=kept.id))
            session.execute(update(LabelRow).where(LabelRow.user_id == merged.id)
                            .values(user_id=kept.id, annotator=kept.name))
            session.execute(update(QueueClaimRow).where(QueueClaimRow.annotator == merged.name)
                            .values(annotator=kept.name))
            record(session, who, "merge_users", kept.name,
                   {"kept": kept.id, "merged": merged.id, "merged_name": merged.name,
                    "merged_identity": [merged.issuer, merged.subject]})
            session.flush()
            return _user_dict(kept)

    def users(self) -> list[dict[str, Any]]:
        """Every user, in order of their first sign-in."""
        with self.session_scope() as session:
            return [_user_dict(row) for row in session.scalars(select(UserRow).order_by(UserRow.id))]

    def audit_events(self, actions: list[str] | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The audit trail, newest first (``actions``: only these)."""
        with self.session_scope() as session:
            query = select(AuditEventRow).order_by(AuditEventRow.id.desc())
            if actions:
                query = query.where(AuditEventRow.action.in_(actions))
            if limit is not None:
                query = query.limit(limit)
            return [
                dict(zip(AUDIT_KEYS, (row.id, row.created_at, row.actor, row.action, row.target, row.detail or {})))
                for row in session.scalars(query)
            ]


def _identity(session: Session, issuer: str, subject: str) -> UserRow | None:
    """The user of (``issuer``, ``subject``); a user from before issuers were recorded (issuer
    ``""``) with that subject is adopted by ``issuer``."""
    row = session.scalars(select(UserRow).where(UserRow.issuer == issuer, UserRow.subject == subject)).first()
    if row is None and issuer:
        row = session.scalars(select(UserRow).where(UserRow.issuer == "", UserRow.subject == subject)).first()
        if row is not None:
            row.issuer = issuer
    return row


def _actor(row: UserRow, issued_at: datetime, expires_at: datetime) -> Actor:
    return Actor(
        row.name, Role(row.role), user_id=row.id, subject=row.subject,
        signed_in_at=issued_at.astimezone(UTC), expires_at=expires_at.astimezone(UTC),
    )


def _user_dict(row: UserRow) -> dict[str, Any]:
    """A user as the store hands it out: ``recorded_as`` is the name their work is recorded under,
    ``name`` the display name the identity provider gave."""
    return row_dict(row, name="recorded_as", display_name="name")

"""The store's side of access control: every guarded write authorizes its actor and records itself
in ``audit_events`` inside its own transaction, so an action and its audit row commit together or
not at all, and a refused action writes nothing.

The rules (roles, permissions, names) are ``qa_core.access``; here the actor is checked against
the users table at the moment of the write: a role changed or a sign-out since the page read the
actor counts, not what the page believed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from db.base import jsonable, now
from db.models import AuditEventRow, CandidateRow, DatasetRow, QuestionRow, UserRow
from qa_core.access import LOCAL, LOCAL_KIND, USER_KIND, AccessDenied, Actor, Permission, Role, require

SIGN_IN_AGAIN = "sign in again (nothing was saved)"
ACTIONS = {  # what each action of the trail means: the Audit page filters and explains by it
    "import": "dataset imported",
    "import_qrels": "labels imported (qrels)",
    "import_run": "first-stage run imported",
    "delete_dataset": "dataset deleted",
    "adjudicate": "conflict adjudicated",
    "train": "training job started",
    "cancel_job": "training job cancelled",
    "register": "model version registered",
    "promote": "model promoted",
    "rollback": "model rolled back",
    "role_change": "role changed",
    "merge_users": "identities merged into one user",
    "save_run": "run saved",
    "calibration_settings": "calibration settings changed",
    "user_created": "first sign-in",
    "sign_out": "signed out",
    "guidelines": "guidelines saved as a new version",
    "annotation_settings": "labelling settings changed",
    "keep question": "question kept in a split",
    "add_system": "external system added",
    "rename_system": "external system renamed",
    "remove_system": "external system removed",
}


def authorize(session: Session, actor: Actor | None, permission: Permission, *, team: bool) -> Actor:
    """The actor that may do ``permission`` now (a signed-in user with their current role), else
    ``AccessDenied``. Without an actor, local mode acts as ``LOCAL``; team mode refuses."""
    if actor is None:
        if team:
            raise AccessDenied("sign in first: this store is in team mode (nothing was saved)")
        actor = LOCAL
    if actor.kind == LOCAL_KIND and team:
        raise AccessDenied("the local user exists only in local mode; sign in (nothing was saved)")
    if actor.signed_in:
        actor = current_user(session, actor)
    return require(actor, permission, now())


def authorize_training(session: Session, actor: Actor | None, *, promote: bool, team: bool) -> Actor:
    """``authorize`` to train, and to promote as well when the training promotes its version."""
    who = authorize(session, actor, Permission.TRAIN, team=team)
    return authorize(session, who, Permission.PROMOTE, team=team) if promote else who


def authorize_creator(session: Session, creator: Actor, job: str, *, promote: bool, team: bool) -> Actor:
    """The actor who queued ``job`` (a training job, as a sentence names it), allowed now to train,
    and to promote when ``promote``: a signed-in user with the role the users table gives them at
    this moment (the user they were merged into, if an admin merged them since), else
    ``AccessDenied`` saying so. Their sign-in is not asked for: a queued job outlives the session
    that queued it, not its creator's rights. Other actors (local, operator) as ``authorize``."""
    if creator.kind != USER_KIND:
        return authorize_training(session, creator, promote=promote, team=team)
    row = session.get(UserRow, creator.user_id) if creator.user_id is not None else None
    if row is None:
        raise AccessDenied(f"{creator.name}, who queued {job}, is no longer a user of this store; nothing was saved")
    row = final_user(session, row)
    who = Actor(row.name, Role(row.role), USER_KIND, row.id, row.subject)
    for permission in (Permission.TRAIN, *([Permission.PROMOTE] if promote else [])):
        if not who.may(permission):
            raise AccessDenied(f"{who.describe()}, who queued {job}, may no longer {permission.value}; nothing was saved")
    return who


def current_user(session: Session, actor: Actor) -> Actor:
    """``actor`` with its role as the users table has it now; ``AccessDenied`` for an unknown user,
    a user merged into another since, or a sign-in that a later sign-out ended."""
    row = session.get(UserRow, actor.user_id) if actor.user_id is not None else None
    if row is None or row.subject != actor.subject:
        raise AccessDenied(f"{actor.name} is not a known user of this store; {SIGN_IN_AGAIN}")
    if row.merged_into is not None:  # signing in again acts as the user it was merged into
        raise AccessDenied(f"{actor.name} was merged into {final_user(session, row).name}; {SIGN_IN_AGAIN}")
    if ended_by_sign_out(actor.signed_in_at, row.signed_out_at):
        raise AccessDenied(
            f"{actor.name} signed out at {row.signed_out_at:%Y-%m-%d %H:%M:%S} UTC, which ended this session; "
            f"{SIGN_IN_AGAIN}"
        )
    return actor.with_role(row.role)


def final_user(session: Session, row: UserRow) -> UserRow:
    """The user that ``row`` was merged into, through every later merge; ``row`` itself if none.
    (``merge_users`` repoints, so one step suffices for merges made since; older stores may chain.)"""
    seen = {row.id}
    while row.merged_into is not None and row.merged_into not in seen:
        row = session.get(UserRow, row.merged_into)
        seen.add(row.id)
    return row


def active_admins(session: Session) -> int:
    """How many users are admin: a row merged into another user is no one's role."""
    return session.scalar(
        select(func.count()).select_from(UserRow).where(UserRow.role == Role.ADMIN.value, UserRow.merged_into.is_(None))
    )


def ended_by_sign_out(signed_in_at: datetime | None, signed_out_at: datetime | None) -> bool:
    """Whether a sign-in issued at ``signed_in_at`` was ended by a sign-out at ``signed_out_at``.
    Identity tokens count in whole seconds (``iat``), so a token issued in the second of the
    sign-out counts as ended: signing in again a second later works."""
    if signed_out_at is None:
        return False
    if signed_in_at is None:
        return True
    return signed_in_at <= signed_out_at.replace(microsecond=0)


def record(
    session: Session, actor: Actor, action: str, target: str = "", detail: dict[str, Any] | None = None
) -> None:
    """Append one audit event in the caller's transaction. ``action`` must be one of ``ACTIONS``:
    one missing there could not be chosen on the Audit page nor asked for by ``audit --action``."""
    if action not in ACTIONS:
        raise ValueError(f"audit action {action!r} is not in db.audit.ACTIONS")
    session.execute(
        insert(AuditEventRow).values(
            created_at=now(),
            actor=actor.name,
            user_id=actor.user_id,
            action=action,
            target=target,
            detail=jsonable(detail) if detail else None,
        )
    )


def candidate_ref(session: Session, candidate_id: int) -> dict[str, Any]:
    """Dataset, qid and doc_id of a candidate, for an audit event's detail."""
    row = session.execute(
        select(DatasetRow.name, QuestionRow.qid, CandidateRow.doc_id)
        .join(QuestionRow, CandidateRow.question_id == QuestionRow.id)
        .join(DatasetRow, QuestionRow.dataset_id == DatasetRow.id)
        .where(CandidateRow.id == candidate_id)
    ).first()
    return {} if row is None else {"dataset": row[0], "qid": row[1], "doc_id": row[2]}

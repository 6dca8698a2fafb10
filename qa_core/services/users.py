"""Users, roles, sign-in and the audit trail: the front door the pages' sign-in gate, the Audit page
and ``python -m qa_core users|audit`` use, without Streamlit. It owns the rules of a sign-in (what
an identity token must carry), of a role change (a known role; the store refuses non-admins and
demoting the last admin inside the write's transaction, ``db/users.py``) and how the trail reads
(tables, CSV)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pandas as pd

from db.audit import ACTIONS as AUDIT_ACTIONS
from qa_core.access import AccessDenied, parse_role
from qa_core.rankers.service_client import shown_url
from qa_core.types import InputError

if TYPE_CHECKING:
    from db.store import Store
    from qa_core.access import Actor, Role

AUDIT_COLUMNS = ["at", "actor", "action", "what", "target", "detail"]
USER_COLUMNS = ["recorded as", "email", "name", "role", "first sign-in", "last sign-in", "signed out", "issuer", "subject"]


def audit_table(store: Store, actions: list[str] | None = None) -> pd.DataFrame:
    """The audit trail, newest first: when (UTC), who, the action, what it means, its target, and its
    detail as JSON text (one cell, so the CSV keeps one row per event)."""
    rows = [
        {
            "at": event["at"],
            "actor": event["actor"],
            "action": event["action"],
            "what": AUDIT_ACTIONS.get(event["action"], event["action"]),
            "target": event["target"],
            "detail": json.dumps(event["detail"], sort_keys=True, default=str) if event["detail"] else "",
        }
        for event in audit_events(store, actions)
    ]
    return pd.DataFrame(rows, columns=AUDIT_COLUMNS)


def audit_csv(table: pd.DataFrame) -> bytes:
    """The table as UTF-8 CSV with ISO times."""
    return table.to_csv(index=False, date_format="%Y-%m-%dT%H:%M:%S%z").encode("utf-8")


def users_table(store: Store) -> pd.DataFrame:
    rows = [
        {
            "email": user["email"],
            "name": user["name"],
            "role": user["role"],
            "first sign-in": user["created_at"],
            "last sign-in": user["last_sign_in_at"],
            "signed out": user["signed_out_at"],
            "recorded as": user["recorded_as"],
            "issuer": user["issuer"],
            "subject": user["subject"],
        }
        for user in store.users.users()
    ]
    return pd.DataFrame(rows, columns=USER_COLUMNS)


def token_time(claims: Mapping[str, Any], claim: str) -> datetime:
    """An identity token's ``iat`` or ``exp`` (seconds since the epoch) as a UTC time;
    ``AccessDenied`` when the provider left it out (OpenID Connect requires both)."""
    value = claims.get(claim)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AccessDenied(f"the identity provider's token has no valid {claim!r} claim; sign-in refused")
    return datetime.fromtimestamp(value, UTC)


def sign_in(store: Store, claims: Mapping[str, Any]) -> Actor:
    """The store's user for the identity token's claims as ``st.user`` gives them (``sub``,
    ``email``, ``name``, ``iat``, ``exp``); see ``UserStore.sign_in``."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise AccessDenied("the identity provider's token names no subject ('sub'); sign-in refused")
    email = claims.get("email") if isinstance(claims.get("email"), str) else None
    name = claims.get("name") if isinstance(claims.get("name"), str) else None
    issuer = claims.get("iss") if isinstance(claims.get("iss"), str) else ""
    return store.users.sign_in(
        subject, email, name, issued_at=token_time(claims, "iat"), expires_at=token_time(claims, "exp"), issuer=issuer
    )


def sign_out(store: Store, actor: Actor) -> None:
    """End every sign-in of ``actor``'s user issued until now (this browser's and any copied
    cookie), recorded in the trail; an actor who never signed in (local mode) has nothing to end."""
    store.users.sign_out(actor)


def grant_role(store: Store, who: str, role: Role | str, *, actor: Actor | None) -> dict[str, Any]:
    """Give ``who`` (as recorded, an email or a subject) ``role`` and return the user;
    ``InputError`` for a role that does not exist (checked before the store is asked), an unknown
    user, or a refusal (not an admin, the last admin stepping down)."""
    return store.users.grant_role(who.strip(), parse_role(str(role)), actor=actor)


def merge_users(store: Store, keep: int, merge: int, *, actor: Actor | None) -> dict[str, Any]:
    """One person signed in under two identities: ``merge`` becomes ``keep`` (the store moves their
    labels, sign-ins and trail, and records the merge)."""
    if keep == merge:
        raise InputError(f"user {keep} cannot be merged into itself")
    return store.users.merge_users(keep, merge, actor=actor)


def audit_events(store: Store, actions: list[str] | None = None) -> list[dict[str, Any]]:
    """The audit trail, newest first, of ``actions`` (every action when ``None``); an action the
    trail does not know is refused, so a typo does not read as "nothing happened"."""
    unknown = sorted(set(actions or ()) - set(AUDIT_ACTIONS))
    if unknown:
        raise InputError(f"unknown audit action(s) {', '.join(unknown)}; known: {', '.join(AUDIT_ACTIONS)}")
    return [_shown(event) for event in store.users.audit_events(actions)]


def _shown(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` as a page, a CSV or a CLI line may show it: a service URL in its detail cut as
    ``shown_url`` cuts it (one added before ``check_url`` refused credentials may still hold them)."""
    detail = event["detail"] or {}
    if not detail.get("url"):
        return event
    return {**event, "detail": {**detail, "url": shown_url(detail["url"])}}

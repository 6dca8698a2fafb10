"""The team's roles and the audit trail as the Audit page and ``python -m qa_core users|audit`` show
them, without Streamlit: tables, CSV, and the sign-in facts an identity token gives."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pandas as pd

from qa_core.access import AccessDenied

if TYPE_CHECKING:
    from db.store import Store
    from qa_core.access import Actor

AUDIT_ACTIONS = {
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
    "user_created": "first sign-in",
    "sign_out": "signed out",
    "guidelines": "guidelines saved as a new version",
    "annotation_settings": "labelling settings changed",
}
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
        for event in store.users.audit_events(actions)
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

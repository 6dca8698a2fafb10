"""Who may do what: the roles of a team, the people (and processes) that act, and the one check.

Plain rules, no Streamlit and no database: the store (``db/audit.py``) calls ``require`` inside the
transaction of every write it guards, after refreshing the actor's role from the users table, so a
page that shows a button by mistake still cannot make an annotator promote a model.

Roles are cumulative: a reviewer may do what an annotator may, an admin everything.

- annotator: label (and undo their own labels), see their own progress, use the read-only pages;
- reviewer: also adjudicate conflicts and see agreement between annotators;
- admin: also import data, train, promote and roll back models, manage roles, read the audit trail,
  and manage a dataset's annotation (its guidelines and labelling settings).

Actors that are not signed-in people:

- ``LOCAL``: the one person of local mode (no sign-in configured), who may do everything, as before
  teams existed. A store in team mode refuses it.
- ``operator(name)``: the command line, run by someone who holds the database URL and so could write
  to the database anyway; it may do everything and is recorded under its OS user name.
- ``SYSTEM``: the app itself (importing the bundled demo corpus into an empty store).
"""

from __future__ import annotations

import getpass
import ipaddress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from urllib.parse import urlsplit

from qa_core.types import InputError


class Role(StrEnum):
    ANNOTATOR = "annotator"
    REVIEWER = "reviewer"
    ADMIN = "admin"


class Permission(StrEnum):
    """What a role may do; the value reads in a sentence ("may not <value>")."""

    VIEW = "use the workbench"
    LABEL = "label pairs"
    SEE_AGREEMENT = "see the agreement between annotators"
    ADJUDICATE = "adjudicate conflicts"
    IMPORT = "import or delete data"
    TRAIN = "train models"
    PROMOTE = "promote models"
    ROLLBACK = "roll back models"
    MANAGE_ROLES = "change roles"
    VIEW_AUDIT = "read the audit trail"
    MANAGE_ANNOTATION = "edit a dataset's guidelines or labelling settings"
    MANAGE_SYSTEMS = "add, rename or remove external systems"


_ANNOTATOR = frozenset({Permission.VIEW, Permission.LABEL})
_REVIEWER = _ANNOTATOR | {Permission.SEE_AGREEMENT, Permission.ADJUDICATE}
ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    Role.ANNOTATOR: _ANNOTATOR,
    Role.REVIEWER: _REVIEWER,
    Role.ADMIN: frozenset(Permission),
}

LOCAL_KIND, OPERATOR_KIND, SYSTEM_KIND, USER_KIND = "local", "operator", "system", "user"


class AccessDenied(InputError):
    """The actor may not do this (role, expired or ended sign-in, someone else's name). Nothing was written."""


@dataclass(frozen=True)
class Actor:
    """Who acts. ``name`` is what labels and the audit trail record: a signed-in user's email (their
    subject when the provider gives none), the typed annotator's name in local mode, or the
    operator's ``cli:<user>``. For signed-in users, ``user_id`` and ``subject`` name the users-table
    row and ``signed_in_at`` / ``expires_at`` come from the identity token (``iat`` / ``exp``)."""

    name: str
    role: Role
    kind: str = USER_KIND
    user_id: int | None = None
    subject: str | None = None
    signed_in_at: datetime | None = None
    expires_at: datetime | None = None

    @property
    def signed_in(self) -> bool:
        """A person who signed in through the identity provider (team mode)."""
        return self.kind == USER_KIND

    def may(self, permission: Permission) -> bool:
        return permission in ROLE_PERMISSIONS[self.role]

    def with_role(self, role: Role | str) -> Actor:
        return replace(self, role=Role(role))

    def describe(self) -> str:
        return f"{self.name} ({self.role})" if self.signed_in else self.name


LOCAL = Actor("local", Role.ADMIN, LOCAL_KIND)
SYSTEM = Actor("system", Role.ADMIN, SYSTEM_KIND)


def operator(user: str) -> Actor:
    """The command line run by OS user ``user`` (see the module docstring)."""
    return Actor(f"cli:{user}", Role.ADMIN, OPERATOR_KIND)


def process_operator() -> Actor:
    """The operator running this process (the CLI, a job process): its OS user, ``unknown`` where
    the uid has no name (some containers)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return operator(user)


def require(actor: Actor, permission: Permission, at: datetime | None = None) -> Actor:
    """``actor`` if it may do ``permission`` now, else ``AccessDenied`` saying why."""
    at = at or datetime.now(UTC)
    if actor.expires_at is not None and actor.expires_at <= at:
        raise AccessDenied(
            f"the sign-in of {actor.name} expired at {actor.expires_at:%Y-%m-%d %H:%M:%S} UTC; "
            "sign in again (nothing was saved)"
        )
    if not actor.may(permission):
        raise AccessDenied(f"{actor.describe()} may not {permission.value}; ask an admin (nothing was saved)")
    return actor


def acting_name(actor: Actor, claimed: str | None, what: str = "annotator") -> str | None:
    """The name a label (or adjudication) is recorded under: a signed-in user's own name whatever a
    request says (a different ``claimed`` name is refused), else ``claimed`` (local mode and the
    command line name annotators freely, e.g. ``qrels:FILE``)."""
    if not actor.signed_in:
        return claimed
    if claimed is not None and claimed.strip() and claimed.strip() != actor.name:
        raise AccessDenied(
            f"{actor.name} cannot record a judgement as {what} {claimed.strip()!r}: in team mode the "
            f"{what} is the signed-in user (nothing was saved)"
        )
    return actor.name


def is_loopback(address: str | None) -> bool:
    """Whether a server bound to ``address`` is reachable from this host only (``""`` or ``None``:
    Streamlit's default, every interface)."""
    if not address:
        return False
    if address.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def plain_http_refusal(address: str | None, redirect_uri: str | None, allow_plain_http: bool) -> str | None:
    """Why team mode must not serve: sign-ins over plain HTTP reachable from the network (the
    identity cookie would cross it unencrypted); ``None`` when it may (loopback only, HTTPS in front
    of it as ``redirect_uri`` says, a ``redirect_uri`` on this host, which completes sign-ins in a
    browser on this host only, or the operator accepted plain HTTP explicitly)."""
    redirect = urlsplit(redirect_uri or "")
    if allow_plain_http or is_loopback(address) or redirect.scheme == "https" or is_loopback(redirect.hostname):
        return None
    where = f"address {address}" if address else "every network interface"
    return (
        f"team mode refuses to serve sign-ins on {where} over plain HTTP (redirect_uri {redirect_uri!r}): the "
        "sign-in cookie would cross the network unencrypted. Put the app behind an HTTPS proxy and give an "
        "https:// redirect_uri, or bind it to 127.0.0.1 (make run does), or set RERANK_LAB_ALLOW_PLAIN_HTTP=1 "
        "to accept the risk"
    )


def parse_role(value: str) -> Role:
    """``Role`` from user input, ``InputError`` naming the roles otherwise."""
    try:
        return Role(value.strip().lower())
    except ValueError:
        raise InputError(f"unknown role {value!r}; roles: {', '.join(Role)}") from None

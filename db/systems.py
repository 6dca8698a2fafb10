"""External systems in the store (issue 36): runs and scoring services kept by name, with their
provenance (file name and SHA-256, URL, who added them and when).

The rules (what a run must fit, what a service must answer) are ``qa_core.services.systems``; here
the rows are written and read. Adding, renaming and removing are guarded writes: the actor needs
``Permission.MANAGE_SYSTEMS`` (admins in team mode), checked in the write's own transaction, and
each is recorded in the audit trail. Removing a system deletes its row only: no label refers to
a system, so none is touched.

A system's name follows the one name rule of datasets, systems and splits (``qa_core.names``).
Two writers giving one name at once both find it free; the database's unique index lets one in,
and the other gets the same "exists already" sentence as a writer who came later.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import delete, exists, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.audit import authorize, record
from db.base import StoreBase, dataset_row, jsonable
from db.models import DatasetRow, SystemRow
from qa_core.access import Actor, Permission
from qa_core.names import check_name
from qa_core.types import InputError

RUN, SERVICE = "run", "service"
KINDS = (RUN, SERVICE)
_LISTED = (SystemRow.id, SystemRow.name, SystemRow.kind, DatasetRow.name.label("dataset"), SystemRow.url,
           SystemRow.file_name, SystemRow.file_sha256, SystemRow.info, SystemRow.added_by, SystemRow.added_at)


class SystemStore(StoreBase):
    """External systems (mixed into ``db.store.Store``)."""

    def add_system(
        self, name: str, kind: str, *, dataset: str | None = None, url: str | None = None,
        file_name: str | None = None, file_sha256: str | None = None, info: dict[str, Any] | None = None,
        scores: dict[str, dict[str, float]] | None = None, actor: Actor | None = None,
    ) -> dict[str, Any]:
        """Keep a system under a new ``name`` and return it as ``systems`` lists it. A run needs a
        ``dataset`` and its ``scores``; a service its ``url``."""
        name = check_name(name, "system name")
        if kind not in KINDS:
            raise InputError(f"a system is a {' or a '.join(KINDS)}, not {kind!r}")
        if kind == RUN and (dataset is None or scores is None):
            raise InputError("a run system needs its dataset and its scores")
        if kind == SERVICE and not url:
            raise InputError("a service system needs its URL")
        with self._claiming(name) as session:
            who = authorize(session, actor, Permission.MANAGE_SYSTEMS, team=self.team)
            _check_free(session, name)
            dataset_id = dataset_row(session, dataset).id if dataset is not None else None
            session.execute(insert(SystemRow).values(
                name=name, kind=kind, dataset_id=dataset_id, url=url, file_name=file_name, file_sha256=file_sha256,
                info=jsonable(info) if info else None, scores=scores, added_by=who.name, user_id=who.user_id,
            ))
            record(session, who, "add_system", name,
                   {"kind": kind, "dataset": dataset, "url": url, "file": file_name, "sha256": file_sha256})
        return self.system(name)

    def systems(self, dataset: str | None = None) -> list[dict[str, Any]]:
        """Every system (with ``dataset``: the runs of that dataset and every service), by name,
        without a run's scores."""
        with self.session_scope() as session:
            query = select(*_LISTED).outerjoin(DatasetRow, SystemRow.dataset_id == DatasetRow.id)
            if dataset is not None:
                query = query.where(or_(SystemRow.kind == SERVICE, DatasetRow.name == dataset))
            return [dict(row._mapping) for row in session.execute(query.order_by(SystemRow.name))]

    def system(self, name: str, *, scores: bool = True) -> dict[str, Any]:
        """One system as ``systems`` lists it, with ``scores`` (a run's; ``None`` for a service)
        unless ``scores`` is false (a page asks for the provenance on every rerun)."""
        with self.session_scope() as session:
            row = session.execute(
                select(*_LISTED, *([SystemRow.scores] if scores else []))
                .outerjoin(DatasetRow, SystemRow.dataset_id == DatasetRow.id)
                .where(SystemRow.name == name)
            ).first()
            if row is None:
                known = list(session.scalars(select(SystemRow.name).order_by(SystemRow.name)))
                raise InputError(f"unknown system {name!r}; known systems: {', '.join(known) or '(none)'}")
            return dict(row._mapping)

    def rename_system(self, name: str, new_name: str, *, actor: Actor | None = None) -> None:
        new_name = check_name(new_name, "system name")
        with self._claiming(new_name) as session:
            who = authorize(session, actor, Permission.MANAGE_SYSTEMS, team=self.team)
            _check_free(session, new_name)
            if session.execute(update(SystemRow).where(SystemRow.name == name).values(name=new_name)).rowcount != 1:
                raise InputError(f"unknown system {name!r}")
            record(session, who, "rename_system", name, {"new_name": new_name})

    def remove_system(self, name: str, *, actor: Actor | None = None) -> None:
        """Delete the system's row (and a run's scores in it); labels are not the system's and stay."""
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.MANAGE_SYSTEMS, team=self.team)
            if session.execute(delete(SystemRow).where(SystemRow.name == name)).rowcount != 1:
                raise InputError(f"unknown system {name!r}")
            record(session, who, "remove_system", name)


    @contextmanager
    def _claiming(self, name: str) -> Iterator[Session]:
        """A write's transaction that gives a system ``name``: when a concurrent writer took the
        name first (the unique index refuses the row), the "exists already" sentence."""
        try:
            with self.session_scope() as session:
                yield session
        except IntegrityError:
            with self.session_scope() as session:
                if not _taken(session, name):
                    raise
            raise _exists(name) from None


def _taken(session: Session, name: str) -> bool:
    return bool(session.scalar(select(exists().where(SystemRow.name == name))))


def _check_free(session: Session, name: str) -> None:
    if _taken(session, name):
        raise _exists(name)


def _exists(name: str) -> InputError:
    return InputError(f"a system named {name!r} exists already; choose another name or remove it first")

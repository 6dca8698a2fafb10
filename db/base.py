"""What every part of the store shares: the engine and sessions, and the queries they all need.

``Store`` (``db/store.py``) is assembled from parts that each own a group of tables: datasets,
labels, registry and runs (``db/store.py``), the labelling queue and review (``db/labeling.py``),
training jobs (``db/jobs.py``). Each part builds on ``StoreBase``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import Engine, Select, exists, func, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from db.models import CandidateRow, DatasetRow, LabelRetractionRow, LabelRow, ModelVersionRow, QuestionRow
from db.session import make_engine, upgrade
from qa_core.types import InputError

MIN_LABEL, MAX_LABEL = 0, 4


class CandidateRecord(NamedTuple):
    """One candidate with its question, as the labelling queue needs it."""

    candidate_id: int
    qid: str
    doc_id: str
    question: str
    candidate: str
    gold_label: int | None


class LabelRecord(NamedTuple):
    """One current judgement (see ``Store.current_labels``)."""

    label_id: int
    candidate_id: int
    annotator: str
    value: int
    created_at: datetime


class StoreBase:
    """Persistent store over SQLite or PostgreSQL; the schema is migrated on construction."""

    def __init__(self, url: str | None = None, engine: Engine | None = None):
        self.engine = engine if engine is not None else make_engine(url)
        upgrade(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    def close(self) -> None:
        """Release pooled connections (tests and scripts that drop the database need this)."""
        self.engine.dispose()

    @property
    def url(self) -> str:
        """The database URL with its password, for a job process that must open the same store."""
        return self.engine.url.render_as_string(hide_password=False)

    @contextmanager
    def session_scope(self) -> Iterator[Session]:
        """A new session: committed when the block succeeds, rolled back when it raises."""
        with self._sessions() as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise


def now() -> datetime:
    return datetime.now(UTC)


def check_annotator(name: object, what: str = "annotator") -> str:
    """The name stripped; ``InputError`` when it is not a non-empty string."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"{what} name is empty")
    return name.strip()


def check_grade(value: object) -> int:
    """A graded judgement 0..4 (an int, not a bool or a float)."""
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_LABEL <= value <= MAX_LABEL:
        raise InputError(f"label must be an integer from {MIN_LABEL} to {MAX_LABEL}, got {value!r}")
    return int(value)


def dataset_row(session: Session, name: str) -> DatasetRow:
    row = session.scalars(select(DatasetRow).where(DatasetRow.name == name)).first()
    if row is None:
        known = list(session.scalars(select(DatasetRow.name).order_by(DatasetRow.name)))
        raise InputError(f"unknown dataset {name!r}; known datasets: {', '.join(known) or '(none)'}")
    return row


def candidates_of(session: Session, dataset: str, *columns: Any) -> Select[Any]:
    """``select(columns)`` over the dataset's candidates joined to their questions."""
    return (
        select(*columns)
        .select_from(CandidateRow)
        .join(QuestionRow, CandidateRow.question_id == QuestionRow.id)
        .where(QuestionRow.dataset_id == dataset_row(session, dataset).id)
    )


def not_retracted() -> Any:
    """WHERE clause: the label has no retraction."""
    return ~exists().where(LabelRetractionRow.label_id == LabelRow.id)


def current_label_ids(candidate_ids: Select[Any] | None = None, per_annotator: bool = True) -> Select[Any]:
    """Ids of the current labels: the latest unretracted label per (candidate, annotator), or per
    candidate (the latest of any annotator) when ``per_annotator`` is false."""
    query = select(func.max(LabelRow.id)).where(not_retracted())
    if candidate_ids is not None:
        query = query.where(LabelRow.candidate_id.in_(candidate_ids))
    if per_annotator:
        return query.group_by(LabelRow.candidate_id, LabelRow.annotator)
    return query.group_by(LabelRow.candidate_id)


def insert_model_version(
    session: Session,
    name: str,
    kind: str,
    checkpoint_path: str | Path,
    training_data: dict[str, Any],
    metrics: dict[str, Any],
    promote: bool,
) -> int:
    """Insert the next version of ``name`` (promoting it if asked) in the caller's transaction.

    Two concurrent callers can pick the same version number: the unique constraint rejects one,
    which retries (``Store.register_model``) or fails its job.
    """
    if not name.strip():
        raise InputError("model name is empty")
    version = 1 + (session.scalar(select(func.max(ModelVersionRow.version)).where(ModelVersionRow.name == name)) or 0)
    if promote:
        clear_promoted(session, name)
    return session.scalar(
        insert(ModelVersionRow)
        .values(
            name=name,
            kind=kind,
            version=version,
            training_data=jsonable(training_data),
            metrics=jsonable(metrics),
            checkpoint_path=str(checkpoint_path),
            promoted=promote,
            promoted_at=now() if promote else None,
        )
        .returning(ModelVersionRow.id)
    )


def clear_promoted(session: Session, name: str) -> None:
    session.execute(
        update(ModelVersionRow)
        .where(ModelVersionRow.name == name, ModelVersionRow.promoted.is_(True))
        .values(promoted=False)
    )


def model_dict(row: ModelVersionRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "kind": row.kind,
        "version": row.version,
        "training_data": row.training_data,
        "metrics": row.metrics,
        "checkpoint_path": row.checkpoint_path,
        "created_at": row.created_at,
        "promoted": row.promoted,
        "promoted_at": row.promoted_at,
        "status": row.status,
    }


def jsonable(value: dict[str, Any]) -> dict[str, Any]:
    """Plain JSON types (numpy scalars and arrays become floats and lists), checked before writing."""

    def convert(obj: Any) -> Any:
        if hasattr(obj, "tolist"):
            return obj.tolist()
        if isinstance(obj, (Path, datetime)):
            return str(obj)
        if isinstance(obj, (set, frozenset)):
            return sorted(obj)
        raise InputError(f"value of type {type(obj).__name__} cannot be stored as JSON")

    return json.loads(json.dumps(value, default=convert))

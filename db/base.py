"""What every part of the store shares: the engine and sessions, and the queries they all need.

``Store`` (``db/store.py``) is one ``Database`` with one part per context over it, each owning a group
of tables: datasets (``db/datasets.py``), labels (``db/labels.py``), the labelling queue and review
(``db/labeling.py``), guidelines and settings (``db/annotation.py``), calibration, preferences,
model versions and promotions (``db/versions.py``), runs (``db/runs.py``), training jobs
(``db/jobs.py``), users (``db/users.py``). Each part builds on ``StoreBase``.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Engine, Select, event, exists, func, insert, inspect, select, update
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, InternalError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from db.models import (
    CandidateRow,
    DatasetRow,
    LabelRetractionRow,
    LabelRow,
    ModelPromotionRow,
    ModelVersionRow,
    QuestionRow,
    StoreInfoRow,
)
from db.session import SQLITE_BUSY_TIMEOUT_MS, make_engine, read_only_engine, upgrade
from qa_core import config
from qa_core.checkpoints import register_checkpoint
from qa_core.types import MAX_NAME_CHARS, InputError, StorageError

MIN_LABEL, MAX_LABEL = 0, 4
# Concurrent registrations of one model name can pick the same next version; the unique
# constraint rejects all but one and the others retry (``insert_model_version``).
REGISTER_ATTEMPTS = 5

T = TypeVar("T")


class CandidateRecord(NamedTuple):
    """One candidate with its question, as the labelling queue needs it."""

    candidate_id: int
    qid: str
    doc_id: str
    question: str
    candidate: str
    gold_label: int | None


class LabelRecord(NamedTuple):
    """One current judgement (see ``LabelStore.current_labels``)."""

    label_id: int
    candidate_id: int
    annotator: str
    value: int
    created_at: datetime


class Database:
    """One SQLite or PostgreSQL database, migrated on construction, and its sessions: every
    context's persistence (``StoreBase``) shares one; ``db.store.Store`` is one with its parts."""

    def __init__(self, url: str | None = None, engine: Engine | None = None, *, team: bool = False):
        """``team``: the app runs in team mode (sign-in configured), so every guarded write needs a
        signed-in actor (``db/audit.py``); otherwise a write without one acts as the local user."""
        self.engine = engine if engine is not None else make_engine(url)
        try:
            upgrade(self.engine)
        except OperationalError:
            read_only = read_only_engine(self.engine)
            if read_only is None:
                raise
            self.engine.dispose()
            self.engine = read_only  # reads work; writes say the database is read-only
            upgrade(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._store_id: str | None = None
        self.team = team

    def close(self) -> None:
        """Release pooled connections (tests and scripts that drop the database need this)."""
        self.engine.dispose()

    @property
    def url(self) -> str:
        """The database URL with its password, for a job process that must open the same store."""
        return self.engine.url.render_as_string(hide_password=False)

    @property
    def store_id(self) -> str:
        """This store's random id (made with the store, or by migration 0003 in an older one); it marks
        the checkpoint files it writes."""
        if self._store_id is None:
            with self.session_scope() as session:
                self._store_id = session.scalar(select(StoreInfoRow.value).where(StoreInfoRow.key == "store_id"))
        return self._store_id

    @contextmanager
    def session_scope(self) -> Iterator[Session]:
        """A new session: committed when the block succeeds, rolled back when it raises.

        The database's own refusals (disk full, read-only, locked too long, a value it cannot hold,
        the server gone) become one ``StorageError`` sentence; integrity errors pass unchanged,
        since callers retry on them.
        """
        try:
            with self._sessions() as session:
                try:
                    yield session
                    session.commit()
                except BaseException:
                    session.rollback()
                    raise
        except (OperationalError, DataError, InternalError) as error:
            raise StorageError(describe_database_error(error)) from error


class StoreBase:
    """One context's persistence over a shared ``Database``: each public method runs in its own
    session and transaction, so one part can be shared by Streamlit threads and background jobs."""

    def __init__(self, database: Database):
        self.database = database

    @property
    def team(self) -> bool:
        """Team mode: every guarded write needs a signed-in actor (``db/audit.py``)."""
        return self.database.team

    def session_scope(self) -> AbstractContextManager[Session]:
        """``Database.session_scope``: a transaction, committed when the block succeeds."""
        return self.database.session_scope()

    def retrying(self, write: Callable[[Session], T], attempts: int) -> T:
        """``write`` in a transaction, run again in a new one when a concurrent writer took the same
        unique key first (an ``IntegrityError``: the next version number, a first sign-in of one
        subject); the refusal of the last of ``attempts`` is raised."""
        for attempt in range(1, attempts + 1):
            try:
                with self.session_scope() as session:
                    return write(session)
            except IntegrityError:
                if attempt == attempts:
                    raise
        raise ValueError(f"attempts must be at least 1, got {attempts}")


def now() -> datetime:
    return datetime.now(UTC)


def describe_database_error(error: DBAPIError) -> str:
    """One sentence for the user about a database refusal (the transaction was rolled back)."""
    reason = " ".join(str(error.orig).split())
    lowered, state = reason.lower(), str(getattr(error.orig, "sqlstate", "") or "")
    if "database or disk is full" in lowered or "no space left" in lowered or state == "53100":
        return "the database's disk is full, so nothing was saved; free some space and try again"
    if "readonly database" in lowered or "read-only" in lowered or state == "25006":
        return "the database is read-only, so nothing was saved"
    if "database is locked" in lowered:
        return (
            f"the database stayed locked by another writer (such as a long import) for "
            f"{SQLITE_BUSY_TIMEOUT_MS // 1000} s, so nothing was saved; try again"
        )
    if state in ("54000", "22001"):
        return "a value is too long for the database, so nothing was saved"
    if "nul" in lowered or state == "22021":
        return "a text holds a character the database cannot store (NUL), so nothing was saved"
    if state.startswith("08") or "connect" in lowered or "server closed" in lowered:
        return f"cannot reach the database ({reason[:200]})"
    return f"the database refused the operation ({reason[:200]}), so nothing was saved"


def check_name(name: object, what: str) -> str:
    """The name stripped; ``InputError`` (``what`` is e.g. "dataset name") unless a non-empty
    string of at most ``MAX_NAME_CHARS`` characters without NUL. Checked here, before the
    database, which would refuse it with a driver error: PostgreSQL stores no NUL and indexes no
    row over 2,704 bytes."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"{what} is empty")
    name = name.strip()
    if len(name) > MAX_NAME_CHARS:
        raise InputError(f"{what} is too long ({len(name):,} characters; the limit is {MAX_NAME_CHARS})")
    if "\x00" in name:
        raise InputError(f"{what} holds a NUL character")
    return name


# Characters that draw nothing: control and format characters (zero-width space, joiners, BOM,
# bidi marks), separators, and the blank letters Unicode classes as letters (Hangul fillers,
# braille blank). A name made only of them reads as blank on every page.
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me"})
# Invisible characters that never belong inside a person's name, so "alice" and "ali\u200bce"
# cannot be two annotators who look the same (ZWJ/ZWNJ stay allowed: scripts and emoji use them).
_SPOOFING = frozenset("\u200b\u2060\ufeff\u00ad\u180e\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def check_annotator(name: object, what: str = "annotator") -> str:
    """``check_name`` for people and sessions (annotator, adjudicator, holder), NFC-normalised;
    a name with nothing visible in it, or with a zero-width or direction character inside, is
    refused (two annotators who look the same on every page would be told apart by nothing)."""
    name = check_name(unicodedata.normalize("NFC", name) if isinstance(name, str) else name, f"{what} name")
    if all(c in _BLANK_LETTERS or unicodedata.category(c) in _INVISIBLE_CATEGORIES for c in name):
        raise InputError(f"{what} name is blank: it holds only invisible characters")
    if any(c in _SPOOFING for c in name):
        raise InputError(f"{what} name holds an invisible character (zero-width or text direction); type it again")
    return name


def check_text(text: str | None, what: str) -> str | None:
    """Free text (notes): anything but NUL, which PostgreSQL cannot store."""
    if text is not None and "\x00" in text:
        raise InputError(f"{what} holds a NUL character")
    return text


def check_grade(value: object) -> int:
    """A graded judgement 0..4 (an int, not a bool or a float)."""
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_LABEL <= value <= MAX_LABEL:
        raise InputError(f"label must be an integer from {MIN_LABEL} to {MAX_LABEL}, got {value!r}")
    return int(value)


def insert_id(session: Session, table: Any, **values: Any) -> int:
    """Insert one row of ``table`` (an ORM class) in the caller's transaction; returns its id."""
    return session.scalar(insert(table).values(**values).returning(table.id))


def row_dict(row: Any, **renamed: str) -> dict[str, Any]:
    """Every column of an ORM row as the store hands it out, in the table's order; ``renamed``
    maps a column to the key callers know it by. The rule: only a table without a secret column
    (a password, a token or its hash, a session id, a URL with a password) goes through here, since
    its every column, a future one too, can reach a page, the CLI's output or a log; a table that
    comes to hold one hands out an explicit list of keys instead."""
    columns = inspect(type(row)).column_attrs
    return {renamed.get(column.key, column.key): getattr(row, column.key) for column in columns}


def latest_row(session: Session, table: Any, dataset: str) -> Any:
    """The dataset's latest row of an append-only settings ``table`` (the latest wins), or ``None``."""
    return session.scalars(
        select(table).where(table.dataset_id == dataset_row(session, dataset).id).order_by(table.id.desc()).limit(1)
    ).first()


def dataset_row(session: Session, name: str) -> DatasetRow:
    row = session.scalars(select(DatasetRow).where(DatasetRow.name == name)).first()
    if row is None:
        known = list(session.scalars(select(DatasetRow.name).order_by(DatasetRow.name)))
        raise InputError(f"unknown dataset {name!r}; known datasets: {', '.join(known) or '(none)'}")
    return row


def candidates_of(session: Session, dataset: str, *columns: Any, retired: bool = False) -> Select[Any]:
    """``select(columns)`` over the dataset's current candidates joined to their questions (with
    ``retired``, over every candidate ever imported, those a re-import retired included)."""
    query = (
        select(*columns)
        .select_from(CandidateRow)
        .join(QuestionRow, CandidateRow.question_id == QuestionRow.id)
        .where(QuestionRow.dataset_id == dataset_row(session, dataset).id)
    )
    return query if retired else query.where(CandidateRow.retired_at.is_(None))


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


ANY_DATASET = "*"
"""The promotion scope of models that serve every dataset (the question classifiers)."""


def promotion_scope(training_data: dict[str, Any]) -> str:
    """Where a version is promoted by default: the dataset it was trained on, else every dataset."""
    return str(training_data.get("dataset") or ANY_DATASET)


def serves(training_data: dict[str, Any] | None, scope: str) -> bool:
    """Whether a version fits ``scope`` unpromoted: trained on that dataset, or on none in particular."""
    return promotion_scope(training_data or {}) in (scope, ANY_DATASET) or scope == ANY_DATASET


@dataclass(frozen=True)
class NewVersion:
    """A trained model's next version, as both of its registrations record it: on its own
    (``VersionStore.register_model``) or as a training job's result (``JobStore.finish_job``);
    ``promote``: make it the version its dataset uses."""

    kind: str
    checkpoint_path: str | Path
    training_data: dict[str, Any]
    metrics: dict[str, Any]
    promote: bool = False


def insert_model_version(session: Session, name: str, new: NewVersion, promote_for: str | None) -> int:
    """Insert ``new`` as the next version of ``name`` (promoting it for ``promote_for`` if given) in
    the caller's transaction.

    Two concurrent callers can pick the same version number: the unique constraint rejects one,
    which retries (``REGISTER_ATTEMPTS``). The checkpoint file gets the version
    id written into it once the caller's transaction commits (a rollback leaves the file as it was),
    and its content hash is kept with the version (loading refuses a file with another); a file
    that does not exist gets none. A file outside the data folder's models folder
    is refused (``InputError``), so nothing is registered or promoted.
    """
    name, kind = check_name(name, "model name"), check_name(new.kind, "model kind")
    checkpoint_path = new.checkpoint_path
    config.inside_checkpoint_dir(checkpoint_path)
    version = 1 + (session.scalar(select(func.max(ModelVersionRow.version)).where(ModelVersionRow.name == name)) or 0)
    version_id = insert_id(
        session, ModelVersionRow, name=name, kind=kind, version=version, training_data=jsonable(new.training_data),
        metrics=jsonable(new.metrics), checkpoint_path=str(checkpoint_path),
    )
    # A file another version registers already (under any spelling) keeps the id it was stamped with:
    # its hash binds it.
    resolved = Path(checkpoint_path).resolve()
    others = session.scalars(select(ModelVersionRow.checkpoint_path).where(ModelVersionRow.id != version_id))
    stamp = register_checkpoint(checkpoint_path, version_id, name, kind,
                                stamp=all(Path(p).resolve() != resolved for p in others))
    event.listen(session, "after_commit", lambda _: stamp.apply(), once=True)
    event.listen(session, "after_rollback", lambda _: stamp.discard(), once=True)
    session.execute(update(ModelVersionRow).where(ModelVersionRow.id == version_id).values(checkpoint_sha256=stamp.sha256))
    if promote_for is not None:
        insert_promotion(session, name, promote_for, version_id, "promote")
    return version_id


def insert_promotion(session: Session, name: str, scope: str, version_id: int, action: str) -> None:
    """From now on ``name`` means version ``version_id`` for ``scope`` (a new history row)."""
    scope = check_name(scope, "dataset")
    session.execute(
        insert(ModelPromotionRow).values(name=name, scope=scope, version_id=version_id, action=action, promoted_at=now())
    )


def promotions(session: Session, name: str, scope: str) -> list[ModelPromotionRow]:
    """The promotion history of ``name`` for ``scope``, newest first (the first is in use)."""
    return list(
        session.scalars(
            select(ModelPromotionRow)
            .where(ModelPromotionRow.name == name, ModelPromotionRow.scope == scope)
            .order_by(ModelPromotionRow.id.desc())
        )
    )


def promoted_scopes(session: Session, name: str | None = None) -> dict[int, list[str]]:
    """``{version id: [scopes it is in use for]}`` over the current promotions (latest per scope)."""
    latest = select(func.max(ModelPromotionRow.id)).group_by(ModelPromotionRow.name, ModelPromotionRow.scope)
    if name is not None:
        latest = latest.where(ModelPromotionRow.name == name)
    scopes: dict[int, list[str]] = {}
    query = select(ModelPromotionRow.version_id, ModelPromotionRow.scope).where(ModelPromotionRow.id.in_(latest))
    for version_id, scope in session.execute(query.order_by(ModelPromotionRow.scope)):
        scopes.setdefault(version_id, []).append(scope)
    return scopes


def model_dict(row: ModelVersionRow, promoted_for: list[str] | None = None) -> dict[str, Any]:
    """A version as the store hands it out; ``promoted_for``: the scopes (datasets, or ``*``) whose
    pages use it now."""
    return {**row_dict(row), "promoted_for": list(promoted_for or [])}


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


def candidate_ids(session: Session, dataset_id: int) -> dict[tuple[str, str], int]:
    """(qid, doc_id) -> id of the dataset's current candidates."""
    rows = session.execute(
        select(QuestionRow.qid, CandidateRow.doc_id, CandidateRow.id)
        .join(QuestionRow, CandidateRow.question_id == QuestionRow.id)
        .where(QuestionRow.dataset_id == dataset_id, CandidateRow.retired_at.is_(None))
    )
    return {(qid, doc_id): candidate_id for qid, doc_id, candidate_id in rows}

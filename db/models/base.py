"""What every table of the store shares: the declarative base with its naming convention, UTC
timestamps, and the partial unique index that keeps one current row among retired ones."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Double, Index, MetaData
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, InstrumentedAttribute
from sqlalchemy.types import TypeDecorator

# Named constraints let SQLite batch migrations (render_as_batch) drop or alter them later.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC timestamps on every back end (SQLite stores them without a zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; the store keeps timezone-aware UTC times")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON(), float: Double()}


def new_store_id() -> str:
    """A random store id (migration 0003 keeps its own copy of this rule: migrations are frozen)."""
    return uuid.uuid4().hex[:12]


def unique_while_null(name: str, *columns: InstrumentedAttribute[Any], null: InstrumentedAttribute[Any]) -> Index:
    """A partial unique index: ``columns`` are unique among the rows whose ``null`` column is NULL
    (current questions and candidates, open claims), on SQLite and PostgreSQL alike, while the
    retired or ended rows beside them may repeat the values."""
    return Index(name, *columns, unique=True, sqlite_where=null.is_(None), postgresql_where=null.is_(None))

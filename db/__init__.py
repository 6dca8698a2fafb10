"""Persistence: SQLAlchemy models, engine and Alembic migrations, and the ``Store`` API."""

from db.session import make_engine, upgrade
from db.store import CandidateRecord, Store

__all__ = ["CandidateRecord", "Store", "make_engine", "upgrade"]

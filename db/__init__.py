"""Persistence: SQLAlchemy models, engine and Alembic migrations, and the ``Store`` API."""

from db.labeling import Claim, QueueProgress
from db.session import make_engine, upgrade
from db.store import CandidateRecord, LabelRecord, Store

__all__ = ["CandidateRecord", "Claim", "LabelRecord", "QueueProgress", "Store", "make_engine", "upgrade"]

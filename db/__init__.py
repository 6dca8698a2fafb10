"""Persistence: SQLAlchemy models, engine and Alembic migrations, and the ``Store`` (a part per context)."""

from db.base import CandidateRecord, LabelRecord
from db.labeling import Claim, QueueProgress
from db.session import make_engine, upgrade
from db.store import Store

__all__ = ["CandidateRecord", "Claim", "LabelRecord", "QueueProgress", "Store", "make_engine", "upgrade"]

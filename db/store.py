"""The store: one database, and one persistence part per bounded context over it.

A caller reaches the part of the context it works in (``store.models.promote``,
``store.queue.claim_next``), never one object with every method. Pages and the CLI do not hold
parts at all: they call the context's front door in ``qa_core/services`` and hand it the store.

Every part's public method runs in its own session and transaction, so one ``Store`` can be
shared by Streamlit threads and background jobs. Bad input raises ``InputError`` and leaves the
database unchanged. Every write that people's roles govern takes an ``actor``
(``qa_core.access``): it is authorized inside the write's transaction and recorded (audit trail,
a label's user). Without one, local mode acts as the local user and team mode refuses
(``db/audit.py``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from db.annotation import AnnotationStore
from db.base import Database
from db.calibration import CalibrationStore
from db.datasets import DatasetStore
from db.jobs import JobStore
from db.keep import KeepStore
from db.labeling import LabelingStore
from db.labels import LabelStore
from db.preferences import PreferenceStore
from db.runs import RunStore
from db.systems import SystemStore
from db.users import UserStore
from db.versions import VersionStore

__all__ = ["Store"]


class Store:
    """Persistent store over SQLite or PostgreSQL; the schema is migrated on construction.

    ``team``: the app runs in team mode (sign-in configured), so every guarded write needs a
    signed-in actor.
    """

    def __init__(self, url: str | None = None, engine: Engine | None = None, *, team: bool = False):
        self.database = Database(url, engine, team=team)
        # datasets and imports
        self.datasets = DatasetStore(self.database)
        self.keep = KeepStore(self.database)  # a typed question kept beside the imported ones
        # labelling and annotation
        self.labels = LabelStore(self.database)
        self.queue = LabelingStore(self.database)
        self.annotation = AnnotationStore(self.database)
        self.calibration = CalibrationStore(self.database)
        self.preferences = PreferenceStore(self.database)
        # models, versions and promotion; evaluation runs; training jobs
        self.models = VersionStore(self.database)
        self.runs = RunStore(self.database)
        self.jobs = JobStore(self.database)
        # external systems: stored runs and scoring services
        self.systems = SystemStore(self.database)
        # users, roles and audit
        self.users = UserStore(self.database)

    @property
    def engine(self) -> Engine:
        return self.database.engine

    @property
    def team(self) -> bool:
        return self.database.team

    @property
    def url(self) -> str:
        """The database URL with its password, for a job process that must open the same store."""
        return self.database.url

    @property
    def store_id(self) -> str:
        """This store's random id; it marks the checkpoint files it writes."""
        return self.database.store_id

    def session_scope(self) -> AbstractContextManager[Session]:
        """A transaction over the store's database (``Database.session_scope``)."""
        return self.database.session_scope()

    def close(self) -> None:
        """Release pooled connections (tests and scripts that drop the database need this)."""
        self.database.close()

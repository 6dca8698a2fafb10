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

from sqlalchemy import Engine

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


class Store(Database):
    """Persistent store over SQLite or PostgreSQL; the schema is migrated on construction.

    The store is its ``Database`` (engine, sessions, URL, id, ``team``: the app runs in team mode,
    sign-in configured, so every guarded write needs a signed-in actor) with one part per context.
    """

    def __init__(self, url: str | None = None, engine: Engine | None = None, *, team: bool = False):
        super().__init__(url, engine, team=team)
        # datasets and imports
        self.datasets = DatasetStore(self)
        self.keep = KeepStore(self)  # a typed question kept beside the imported ones
        # labelling and annotation
        self.labels = LabelStore(self)
        self.queue = LabelingStore(self)
        self.annotation = AnnotationStore(self)
        self.calibration = CalibrationStore(self)
        self.preferences = PreferenceStore(self)
        # models, versions and promotion; evaluation runs; training jobs
        self.models = VersionStore(self)
        self.runs = RunStore(self)
        self.jobs = JobStore(self)
        # external systems: stored runs and scoring services
        self.systems = SystemStore(self)
        # users, roles and audit
        self.users = UserStore(self)

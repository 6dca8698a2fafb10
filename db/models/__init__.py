"""SQLAlchemy 2 ORM models of the store, one module per context (``datasets``, ``labeling``,
``versions``, ``runs``, ``systems``, ``users``) over one declarative ``Base`` (``base``).

Importing this package imports every table module, so ``Base.metadata`` is the whole schema
(what Alembic and ``create_schema`` read). Migrations ``0001_initial`` to ``0011_systems`` create
exactly these tables; ``tests/test_store.py`` checks that the two agree, so any change here needs
a new Alembic revision.

History is append-only wherever people's work is recorded: a judgement is never updated or
deleted (undo appends a ``label_retractions`` row), adjudications and queue claims are new rows,
and a training job's progress is a stream of ``training_events``. A re-import never deletes a
question or candidate either: one that left the file is marked ``retired_at`` and keeps its
labels (``db/reimport.py``), so a label row always has its candidate.
"""

from db.models.base import Base, new_store_id
from db.models.datasets import CandidateRow, DatasetRow, QuestionRow, StoreInfoRow
from db.models.labeling import (
    AdjudicationRow,
    AnnotationSettingsRow,
    CalibrationJudgementRow,
    CalibrationSettingsRow,
    GuidelineRow,
    LabelRetractionRow,
    LabelRow,
    PreferenceJudgementRow,
    PreferenceRetractionRow,
    QueueClaimRow,
)
from db.models.runs import RunRow, RunScoreRow
from db.models.systems import SystemRow
from db.models.users import AuditEventRow, UserRow
from db.models.versions import ModelPromotionRow, ModelVersionRow, TrainingEventRow, TrainingJobRow

__all__ = [
    "AdjudicationRow",
    "AnnotationSettingsRow",
    "AuditEventRow",
    "Base",
    "CalibrationJudgementRow",
    "CalibrationSettingsRow",
    "CandidateRow",
    "DatasetRow",
    "GuidelineRow",
    "LabelRetractionRow",
    "LabelRow",
    "ModelPromotionRow",
    "ModelVersionRow",
    "PreferenceJudgementRow",
    "PreferenceRetractionRow",
    "QuestionRow",
    "QueueClaimRow",
    "RunRow",
    "RunScoreRow",
    "StoreInfoRow",
    "SystemRow",
    "TrainingEventRow",
    "TrainingJobRow",
    "UserRow",
    "new_store_id",
]

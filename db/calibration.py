"""Calibration of new annotators in the store (issue 21, item 1): a dataset's calibration settings
and the calibration judgements, apart from ``labels`` so they never count as training labels nor
in the agreement between annotators, and kept like every record of people's work (append-only,
with annotator, session, times and guideline version).

Which gold pairs a run shows and what the result is are the labelling services' rules
(``qa_core.services.labeling.calibration``); here is only what is stored. The settings are the
dataset manager's (``Permission.MANAGE_ANNOTATION``: an admin in team mode, anyone locally),
checked and audited inside the write's transaction; a judgement needs the right to label and, when
signed in, is made in the actor's own name.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from db.annotation import guideline_in_force
from db.audit import authorize, record
from db.base import StoreBase, candidates_of, check_annotator, check_grade, dataset_row, insert_id, latest_row
from db.models import CalibrationJudgementRow, CalibrationSettingsRow, CandidateRow, GuidelineRow, QuestionRow
from qa_core.access import Actor, Permission, acting_name
from qa_core.types import InputError

DEFAULT_CALIBRATION_PAIRS = 5
MAX_CALIBRATION_PAIRS = 50


class CalibrationSettings(NamedTuple):
    """A dataset's calibration settings; ``settings_id`` is ``None`` for the defaults (off)."""

    settings_id: int | None
    enabled: bool
    pairs: int
    changed_by: str | None = None
    changed_at: datetime | None = None


DEFAULT_CALIBRATION = CalibrationSettings(None, False, DEFAULT_CALIBRATION_PAIRS)


class CalibrationJudgement(NamedTuple):
    """One calibration judgement; ``run_pairs`` is the size of the run it belongs to (the
    settings row the annotator's calibration started under)."""

    judgement_id: int
    settings_id: int
    run_pairs: int
    candidate_id: int
    qid: str
    doc_id: str
    annotator: str
    value: int
    gold: int
    guideline_version: int | None
    shown_at: datetime
    judged_at: datetime


class CalibrationStore(StoreBase):
    """Calibration settings and judgements (mixed into ``db.store.Store``)."""

    def set_calibration(
        self, dataset: str, enabled: bool, pairs: int, changed_by: str | None = None, *, actor: Actor | None = None
    ) -> CalibrationSettings:
        """Record whether new annotators of ``dataset`` calibrate first, on how many gold pairs, and
        return the settings. A signed-in ``actor`` is the changer and must be an admin."""
        if isinstance(pairs, bool) or not isinstance(pairs, int) or not 1 <= pairs <= MAX_CALIBRATION_PAIRS:
            raise InputError(f"a calibration shows 1 to {MAX_CALIBRATION_PAIRS} gold pairs, got {pairs!r}")
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.MANAGE_ANNOTATION, team=self.team)
            changed_by = check_annotator(acting_name(who, changed_by, "changer"), "the changer's")
            row = CalibrationSettingsRow(
                dataset_id=dataset_row(session, dataset).id, enabled=bool(enabled), pairs=pairs, changed_by=changed_by
            )
            session.add(row)
            session.flush()
            record(session, who, "calibration_settings", dataset,
                   {"enabled": bool(enabled), "pairs": pairs, "changed_by": changed_by})
            return _settings(row)

    def calibration_settings(self, dataset: str) -> CalibrationSettings:
        """The dataset's latest calibration settings, or ``DEFAULT_CALIBRATION`` (off) when none were set."""
        with self.session_scope() as session:
            row = latest_row(session, CalibrationSettingsRow, dataset)
            return DEFAULT_CALIBRATION if row is None else _settings(row)

    def record_calibration(
        self, candidate_id: int, value: int, annotator: str | None, settings_id: int, shown_at: datetime,
        holder: str | None = None, *, actor: Actor | None = None,
    ) -> int | None:
        """Store the annotator's calibration grade of a gold pair (shown at ``shown_at``, in the
        run started under ``settings_id``) with its gold label as it is now; returns its id, or
        ``None`` when the annotator has judged that pair in calibration already (a second tab's
        late press: the first judgement stands)."""
        value = check_grade(value)
        try:
            with self.session_scope() as session:
                who = authorize(session, actor, Permission.LABEL, team=self.team)
                annotator = check_annotator(acting_name(who, annotator))
                candidate = session.get(CandidateRow, candidate_id)
                if candidate is None:
                    raise InputError(f"no candidate with id {candidate_id}")
                if candidate.gold_label is None:
                    raise InputError("a calibration pair needs a gold label; this one has none")
                if session.get(CalibrationSettingsRow, settings_id) is None:
                    raise InputError(f"no calibration settings with id {settings_id}")
                return insert_id(
                    session, CalibrationJudgementRow, settings_id=settings_id, candidate_id=candidate_id,
                    annotator=annotator, user_id=who.user_id, holder=holder, value=value, gold=candidate.gold_label,
                    guideline_id=guideline_in_force(session, candidate_id), shown_at=shown_at,
                )
        except IntegrityError:
            return None

    def calibration_judgements(self, dataset: str, annotator: str | None = None) -> list[CalibrationJudgement]:
        """The dataset's calibration judgements (one annotator's if given), oldest first."""
        with self.session_scope() as session:
            query = (
                select(CalibrationJudgementRow, CalibrationSettingsRow.pairs, QuestionRow.qid, CandidateRow.doc_id,
                       GuidelineRow.version)
                .join(CalibrationSettingsRow, CalibrationJudgementRow.settings_id == CalibrationSettingsRow.id)
                .join(CandidateRow, CalibrationJudgementRow.candidate_id == CandidateRow.id)
                .join(QuestionRow, CandidateRow.question_id == QuestionRow.id)
                .outerjoin(GuidelineRow, CalibrationJudgementRow.guideline_id == GuidelineRow.id)
                .where(CalibrationJudgementRow.candidate_id.in_(
                    candidates_of(session, dataset, CandidateRow.id, retired=True)))
                .order_by(CalibrationJudgementRow.id)
            )
            if annotator is not None:
                query = query.where(CalibrationJudgementRow.annotator == annotator)
            return [
                CalibrationJudgement(
                    row.id, row.settings_id, pairs, row.candidate_id, qid, doc_id, row.annotator, row.value,
                    row.gold, version, row.shown_at, row.created_at,
                )
                for row, pairs, qid, doc_id, version in session.execute(query)
            ]


def _settings(row: CalibrationSettingsRow) -> CalibrationSettings:
    return CalibrationSettings(row.id, row.enabled, row.pairs, row.changed_by, row.created_at)

"""The annotation side of the store (issue 21): a dataset's guidelines with their versions, its
labelling settings (the share of double-annotated pairs), and how long each judgement took.

Guidelines and settings are append-only like every record of people's work: a new version or a
new setting is a new row and the latest wins, so the history says which guidelines a label was
made under (``labels.guideline_id``, written by ``LabelingStore.label_claim``) and who changed
the overlap when.

Both are the dataset manager's: in team mode only an admin (``Permission.MANAGE_ANNOTATION``)
writes them, checked and audited inside the write's transaction like every guarded write
(``db/audit.py``); local mode lets anyone.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from db.audit import authorize, record
from db.base import StoreBase, candidates_of, check_annotator, check_text, dataset_row, latest_row, not_retracted
from db.models import (
    AnnotationSettingsRow,
    CandidateRow,
    GuidelineRow,
    LabelRow,
    QuestionRow,
    QueueClaimRow,
)
from qa_core.access import Actor, Permission, acting_name
from qa_core.types import InputError

MAX_GUIDELINE_CHARS = 100_000
GUIDELINE_ATTEMPTS = 5  # two editors saving at once: the loser takes the next version number


class Guideline(NamedTuple):
    """One version of a dataset's guidelines."""

    guideline_id: int
    version: int
    text: str
    author: str
    created_at: datetime


class AnnotationSettings(NamedTuple):
    """A dataset's labelling settings; ``changed_by`` is ``None`` for the defaults."""

    overlap_share: float
    overlap: int
    changed_by: str | None = None
    changed_at: datetime | None = None


DEFAULT_SETTINGS = AnnotationSettings(overlap_share=0.2, overlap=2)


class JudgementTime(NamedTuple):
    """How long one queue judgement took: from the pair being shown (its claim) to the label."""

    label_id: int
    candidate_id: int
    annotator: str
    shown_at: datetime
    judged_at: datetime

    @property
    def seconds(self) -> float:
        return (self.judged_at - self.shown_at).total_seconds()


class AnnotationStore(StoreBase):
    """Guidelines, labelling settings and judgement times (mixed into ``db.store.Store``)."""

    # ------------------------------------------------------------------ guidelines

    def save_guidelines(
        self, dataset: str, text: str, author: str | None = None, *, actor: Actor | None = None
    ) -> Guideline:
        """Store ``text`` (markdown) as the dataset's next guideline version and return it; text
        equal to the version in force adds nothing and returns that version. A signed-in ``actor``
        is the author (``author``: ``None`` or their name) and must be an admin."""
        text = check_text(text, "the guidelines") or ""
        if not text.strip():
            raise InputError("the guidelines are empty")
        if len(text) > MAX_GUIDELINE_CHARS:
            raise InputError(f"the guidelines are too long ({len(text):,} characters; the limit is {MAX_GUIDELINE_CHARS:,})")
        def save(session: Session) -> Guideline:
            who = authorize(session, actor, Permission.MANAGE_ANNOTATION, team=self.team)
            writer = check_annotator(acting_name(who, author, "author"), "author")
            dataset_id = dataset_row(session, dataset).id
            latest = _latest_guideline(session, dataset_id)
            if latest is not None and latest.text == text:
                return _guideline(latest)
            version = 1 if latest is None else latest.version + 1
            row = GuidelineRow(dataset_id=dataset_id, version=version, text=text, author=writer)
            session.add(row)
            session.flush()
            record(session, who, "guidelines", dataset, {"version": version, "author": writer,
                                                         "characters": len(text)})
            return _guideline(row)

        return self.retrying(save, GUIDELINE_ATTEMPTS)

    def guidelines(self, dataset: str) -> Guideline | None:
        """The dataset's guidelines in force (its latest version), or ``None`` when it has none."""
        with self.session_scope() as session:
            latest = _latest_guideline(session, dataset_row(session, dataset).id)
            return None if latest is None else _guideline(latest)

    def guideline_history(self, dataset: str) -> list[Guideline]:
        """Every version of the dataset's guidelines, oldest first."""
        with self.session_scope() as session:
            rows = session.scalars(
                select(GuidelineRow)
                .where(GuidelineRow.dataset_id == dataset_row(session, dataset).id)
                .order_by(GuidelineRow.version)
            )
            return [_guideline(row) for row in rows]

    def label_guideline_versions(self, dataset: str) -> dict[int, int | None]:
        """``{label_id: guideline version}`` of the dataset's labels (``None``: made under none)."""
        with self.session_scope() as session:
            rows = session.execute(
                select(LabelRow.id, GuidelineRow.version)
                .outerjoin(GuidelineRow, LabelRow.guideline_id == GuidelineRow.id)
                .where(LabelRow.candidate_id.in_(candidates_of(session, dataset, CandidateRow.id, retired=True)))
            )
            return {label_id: version for label_id, version in rows}

    # ------------------------------------------------------------------ settings

    def set_annotation_settings(
        self, dataset: str, overlap_share: float, overlap: int, changed_by: str | None = None, *,
        actor: Actor | None = None,
    ) -> None:
        """Record the dataset's new share of pairs that want ``overlap`` annotators. A signed-in
        ``actor`` is the changer (``changed_by``: ``None`` or their name) and must be an admin."""
        if not 0.0 <= overlap_share <= 1.0:
            raise InputError(f"the share of double-annotated pairs must lie in [0, 1], got {overlap_share}")
        if isinstance(overlap, bool) or not isinstance(overlap, int) or overlap < 2:
            raise InputError(f"a double-annotated pair wants 2 or more annotators, got {overlap!r}")
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.MANAGE_ANNOTATION, team=self.team)
            changed_by = check_annotator(acting_name(who, changed_by, "changer"), "the changer's")
            session.execute(
                insert(AnnotationSettingsRow).values(
                    dataset_id=dataset_row(session, dataset).id,
                    overlap_share=float(overlap_share),
                    overlap=overlap,
                    changed_by=changed_by,
                )
            )
            record(session, who, "annotation_settings", dataset,
                   {"overlap_share": float(overlap_share), "overlap": overlap, "changed_by": changed_by})

    def annotation_settings(self, dataset: str) -> AnnotationSettings:
        """The dataset's latest settings, or ``DEFAULT_SETTINGS`` when none were set."""
        with self.session_scope() as session:
            row = latest_row(session, AnnotationSettingsRow, dataset)
        if row is None:
            return DEFAULT_SETTINGS
        return AnnotationSettings(row.overlap_share, row.overlap, row.changed_by, row.created_at)

    # ------------------------------------------------------------------ timings

    def judgement_times(self, dataset: str) -> list[JudgementTime]:
        """The dataset's current (unretracted) queue judgements with when their pair was shown;
        labels written outside the queue (imports, ``add_label``) have no such time."""
        with self.session_scope() as session:
            rows = session.execute(
                select(LabelRow.id, LabelRow.candidate_id, LabelRow.annotator, QueueClaimRow.claimed_at, LabelRow.created_at)
                .join(QueueClaimRow, LabelRow.claim_id == QueueClaimRow.id)
                .where(LabelRow.candidate_id.in_(candidates_of(session, dataset, CandidateRow.id)), not_retracted())
                .order_by(LabelRow.id)
            )
            return [JudgementTime(*row) for row in rows]


def guideline_in_force(session: Session, candidate_id: int) -> int | None:
    """Id of the guideline version in force for the candidate's dataset (``None``: none yet)."""
    dataset_id = (
        select(QuestionRow.dataset_id)
        .join(CandidateRow, CandidateRow.question_id == QuestionRow.id)
        .where(CandidateRow.id == candidate_id)
        .scalar_subquery()
    )
    return session.scalar(
        select(GuidelineRow.id)
        .where(GuidelineRow.dataset_id == dataset_id)
        .order_by(GuidelineRow.version.desc())
        .limit(1)
    )


def _latest_guideline(session: Session, dataset_id: int) -> GuidelineRow | None:
    return session.scalars(
        select(GuidelineRow)
        .where(GuidelineRow.dataset_id == dataset_id)
        .order_by(GuidelineRow.version.desc())
        .limit(1)
    ).first()


def _guideline(row: GuidelineRow) -> Guideline:
    return Guideline(row.id, row.version, row.text, row.author, row.created_at)


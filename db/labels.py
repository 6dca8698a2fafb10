"""Persistence of the labels (append-only graded judgements, undone by retraction rows): adding
one, importing qrels, undoing one (a retraction), adjudicating a pair, the current labels, their
history, and the exports.

The labelling queue is ``db/labeling.py``; guidelines and annotation
settings ``db/annotation.py``; calibration ``db/calibration.py``; preferences ``db/preferences.py``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import exists, insert, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.audit import authorize, candidate_ref, record
from db.base import (
    MAX_LABEL,
    MIN_LABEL,
    LabelRecord,
    StoreBase,
    candidate_ids,
    candidates_of,
    check_annotator,
    check_grade,
    check_text,
    current_label_ids,
    dataset_row,
    insert_id,
    not_retracted,
)
from db.models import AdjudicationRow, CandidateRow, LabelRetractionRow, LabelRow, QuestionRow, QueueClaimRow
from qa_core.access import Actor, Permission, acting_name
from qa_core.data.exporters import write_jsonl, write_qrels
from qa_core.types import InputError

QRELS_SOURCES = ("labels", "gold")
# An undo runs again when a concurrent writer took a unique key first (see ``LastLabelUndo``).
UNDO_ATTEMPTS = 5
LABEL_HISTORY_KEYS = (
    "qid", "doc_id", "question", "candidate", "annotator", "value", "note", "created_at", "retracted_at", "retired_at"
)


class QrelsImport(NamedTuple):
    """What ``LabelStore.import_qrels`` did: judgements added, and those already current (skipped)."""

    added: int
    unchanged: int


class LabelStore(StoreBase):
    """The label table with its history (every judgement stays, undo adds a retraction) and the
    reviewers' adjudications, which win over every annotator's label."""


    def add_label(
        self, candidate_id: int, annotator: str | None, value: int, note: str | None = None, *,
        actor: Actor | None = None,
    ) -> int:
        """Append a graded judgement (0..4) and return its id; earlier ones stay as history.

        A signed-in ``actor`` labels as themselves: ``annotator`` may be ``None`` (their name) or
        their name, never another's. A candidate a re-import retired meanwhile still takes the
        label (kept with the orphans); only one whose dataset was deleted refuses it.
        """
        value, note = check_grade(value), check_text(note, "the note")
        try:
            with self.session_scope() as session:
                who = authorize(session, actor, Permission.LABEL, team=self.team)
                annotator = check_annotator(acting_name(who, annotator))
                if session.get(CandidateRow, candidate_id) is None:
                    raise InputError(f"no candidate with id {candidate_id}")
                return insert_id(
                    session, LabelRow, candidate_id=candidate_id, annotator=annotator, value=value, note=note,
                    user_id=who.user_id,
                )
        except IntegrityError:  # its dataset was deleted between the check and the insert
            raise InputError(f"no candidate with id {candidate_id} (its dataset was deleted); not saved") from None

    def import_qrels(
        self,
        dataset: str,
        qrels: Mapping[str, Mapping[str, int]],
        annotator: str,
        *,
        lines: Mapping[tuple[str, str], int] | None = None,
        path: str | None = None,
        actor: Actor | None = None,
    ) -> QrelsImport:
        """Add every qrels judgement as a label by ``annotator``, in one transaction, except those
        that are already ``annotator``'s current label of the pair (so importing a file again adds
        nothing). An unknown (qid, doc_id) or a grade outside 0..4 rejects the whole file; with
        the file's ``path`` and ``lines`` ((qid, doc_id) -> line) the error names them."""
        annotator = check_annotator(annotator)

        def fail(message: str, qid: str, doc_id: str) -> InputError:
            return InputError(message, path=path, line=(lines or {}).get((qid, doc_id)))

        with self.session_scope() as session:
            who = authorize(session, actor, Permission.IMPORT, team=self.team)
            ids = candidate_ids(session, dataset_row(session, dataset).id)
            current = dict(
                session.execute(
                    select(LabelRow.candidate_id, LabelRow.value).where(
                        LabelRow.id.in_(current_label_ids(candidates_of(session, dataset, CandidateRow.id))),
                        LabelRow.annotator == annotator,
                    )
                ).all()
            )
            rows = []
            for qid, grades in qrels.items():
                for doc_id, grade in grades.items():
                    if (qid, doc_id) not in ids:
                        raise fail(f"dataset {dataset!r} has no candidate {doc_id!r} for question {qid!r}", qid, doc_id)
                    if not MIN_LABEL <= int(grade) <= MAX_LABEL:
                        raise fail(f"grade {grade} of ({qid}, {doc_id}) is outside {MIN_LABEL}..{MAX_LABEL}", qid, doc_id)
                    if current.get(ids[(qid, doc_id)]) != int(grade):
                        rows.append({"candidate_id": ids[(qid, doc_id)], "annotator": annotator, "value": int(grade),
                                     "user_id": who.user_id})
            if rows:
                session.execute(insert(LabelRow), rows)
            result = QrelsImport(len(rows), sum(len(grades) for grades in qrels.values()) - len(rows))
            record(session, who, "import_qrels", dataset,
                   {"annotator": annotator, "path": path, "added": result.added, "unchanged": result.unchanged})
            return result

    def current_labels(self, dataset: str, annotator: str | None = None) -> dict[int, dict[str, int]]:
        """Current value per candidate and annotator: ``{candidate_id: {annotator: value}}``.

        An annotator's current label is their latest judgement that has not been retracted (undo).
        """
        result: dict[int, dict[str, int]] = defaultdict(dict)
        for label in self.current_label_records(dataset, annotator):
            result[label.candidate_id][label.annotator] = label.value
        return dict(result)

    def current_label_records(self, dataset: str, annotator: str | None = None) -> list[LabelRecord]:
        """The current labels (see ``current_labels``) with their ids and times, oldest first."""
        with self.session_scope() as session:
            query = select(LabelRow).where(
                LabelRow.id.in_(current_label_ids(candidates_of(session, dataset, CandidateRow.id)))
            )
            if annotator is not None:
                query = query.where(LabelRow.annotator == annotator)
            return [
                LabelRecord(row.id, row.candidate_id, row.annotator, row.value, row.created_at)
                for row in session.scalars(query.order_by(LabelRow.id))
            ]

    def label_history(self, candidate_id: int) -> list[dict[str, Any]]:
        """Every judgement of the candidate, oldest first; ``retracted_at`` is set on undone ones."""
        with self.session_scope() as session:
            rows = session.execute(
                select(LabelRow, LabelRetractionRow.created_at)
                .outerjoin(LabelRetractionRow, LabelRetractionRow.label_id == LabelRow.id)
                .where(LabelRow.candidate_id == candidate_id)
                .order_by(LabelRow.id)
            )
            return [
                {
                    "id": row.id,
                    "annotator": row.annotator,
                    "value": row.value,
                    "note": row.note,
                    "created_at": row.created_at,
                    "retracted_at": retracted_at,
                }
                for row, retracted_at in rows
            ]

    def qrels(self, dataset: str, source: str = "labels") -> dict[str, dict[str, int]]:
        """``{qid: {doc_id: grade}}`` from the latest unretracted label of any annotator, or from gold
        labels. (The rule that also weighs adjudications and several annotators is
        ``qa_core.services.labeling.training_labels``.)"""
        if source not in QRELS_SOURCES:
            raise InputError(f"qrels source must be one of {', '.join(QRELS_SOURCES)}, got {source!r}")
        with self.session_scope() as session:
            if source == "gold":
                query = candidates_of(
                    session, dataset, QuestionRow.qid, CandidateRow.doc_id, CandidateRow.gold_label
                ).where(CandidateRow.gold_label.is_not(None))
            else:
                latest = current_label_ids(per_annotator=False)
                query = (
                    candidates_of(session, dataset, QuestionRow.qid, CandidateRow.doc_id, LabelRow.value)
                    .join(LabelRow, LabelRow.candidate_id == CandidateRow.id)
                    .where(LabelRow.id.in_(latest))
                )
            result: dict[str, dict[str, int]] = {}
            for qid, doc_id, grade in session.execute(
                query.order_by(QuestionRow.position, QuestionRow.id, CandidateRow.position, CandidateRow.id)
            ):
                result.setdefault(qid, {})[doc_id] = grade
            return result

    def export_qrels(self, dataset: str, path: str | Path, source: str = "labels") -> int:
        """Write TREC qrels (``qid 0 doc_id grade``) atomically; returns the lines written."""
        return write_qrels(self.qrels(dataset, source), path)

    def export_labels_jsonl(self, dataset: str, path: str | Path) -> int:
        """Write the full label history, one JSON object per judgement, atomically: ``retracted_at``
        is null unless the judgement was undone, ``retired_at`` null unless a re-import retired its
        candidate (the label is kept: see ``orphaned_labels``)."""
        return write_jsonl(self._label_history(dataset, orphans_only=False), path)

    def orphaned_labels(self, dataset: str) -> list[dict[str, Any]]:
        """Every judgement on a candidate that a re-import retired (its text left the file), or
        made before a re-import edited the candidate's text under the same id (it judged the earlier
        text; it stays current on the id), oldest first, as ``export_labels_jsonl`` writes them,
        each with its ``reason``: ``retired`` or ``text edited``."""
        return self._label_history(dataset, orphans_only=True)

    def _label_history(self, dataset: str, orphans_only: bool) -> list[dict[str, Any]]:
        with self.session_scope() as session:
            query = (
                candidates_of(
                    session,
                    dataset,
                    QuestionRow.qid,
                    CandidateRow.doc_id,
                    QuestionRow.text,
                    CandidateRow.text,
                    LabelRow.annotator,
                    LabelRow.value,
                    LabelRow.note,
                    LabelRow.created_at,
                    LabelRetractionRow.created_at,
                    CandidateRow.retired_at,
                    CandidateRow.text_edited_at,
                    retired=True,
                )
                .join(LabelRow, LabelRow.candidate_id == CandidateRow.id)
                .outerjoin(LabelRetractionRow, LabelRetractionRow.label_id == LabelRow.id)
                .order_by(LabelRow.id)
            )
            if orphans_only:
                query = query.where(or_(CandidateRow.retired_at.is_not(None),
                                        LabelRow.created_at < CandidateRow.text_edited_at))
            rows = session.execute(query).all()
        records = []
        for *row, text_edited_at in rows:
            record = dict(zip(LABEL_HISTORY_KEYS, (*row[:-3], *(None if t is None else t.isoformat() for t in row[-3:]))))
            if orphans_only:
                record["reason"] = "retired" if record["retired_at"] else f"text edited at {text_edited_at.isoformat()}"
            records.append(record)
        return records

    # ------------------------------------------------------------------ undo

    def undo_last(self, annotator: str | None, dataset: str | None = None, *, actor: Actor | None = None) -> dict[str, Any] | None:
        """Retract ``annotator``'s latest current judgement (in ``dataset`` if given) and return it
        (``label_id``, ``candidate_id``, ``value``, and the pair's ``dataset``, ``qid`` and ``doc_id``, as
        the pages name it); ``None`` when there is nothing to undo, or when another undo took that
        judgement back meanwhile (see ``LastLabelUndo``).

        The judgement stays in the history, marked retracted; the annotator's previous judgement
        of that pair, if any, becomes current again. Repeated calls undo further back. A
        signed-in ``actor`` undoes only their own judgements. (The Label page's per-tab undo is
        ``LabelingStore.undo_and_claim``.)
        """
        undoing = LastLabelUndo()

        def undo(session: Session) -> dict[str, Any] | None:
            who = authorize(session, actor, Permission.LABEL, team=self.team)
            label = undoing.retract(session, check_annotator(acting_name(who, annotator)), dataset)
            return None if label is None else {"label_id": label.id, "candidate_id": label.candidate_id, "value": label.value,
                                               **candidate_ref(session, label.candidate_id)}

        return self.retrying(undo, UNDO_ATTEMPTS)

    # ------------------------------------------------------------------ adjudication

    def adjudicate(
        self, candidate_id: int, value: int, adjudicator: str | None, note: str | None = None, *,
        actor: Actor | None = None,
    ) -> int:
        """Record a reviewer's final value for a candidate and return its id; the latest
        adjudication wins over every annotator's label (``qa_core.services.labeling.training_labels``).
        A signed-in ``actor`` adjudicates as themselves (``adjudicator``: ``None`` or their name).

        A reviewer who has a current label on the pair is a party to its conflict and may not
        settle it (``InputError``): another reviewer does."""
        value, note = check_grade(value), check_text(note, "the note")
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.ADJUDICATE, team=self.team)
            adjudicator = check_annotator(acting_name(who, adjudicator, "adjudicator"), "adjudicator")
            if session.get(CandidateRow, candidate_id) is None:
                raise InputError(f"no candidate with id {candidate_id}")
            if session.scalar(
                select(exists().where(LabelRow.candidate_id == candidate_id, LabelRow.annotator == adjudicator, not_retracted()))
            ):
                raise InputError(
                    f"{adjudicator} labelled this pair, so cannot settle its conflict: another reviewer must"
                )
            adjudication_id = insert_id(
                session, AdjudicationRow, candidate_id=candidate_id, value=value, adjudicator=adjudicator,
                note=note,
            )
            ref = candidate_ref(session, candidate_id)
            record(session, who, "adjudicate", f"{ref.get('dataset')} {ref.get('qid')}/{ref.get('doc_id')}",
                   {"candidate_id": candidate_id, "value": value, "adjudicator": adjudicator, "note": note})
            return adjudication_id

    def adjudications(self, dataset: str) -> dict[int, dict[str, Any]]:
        """The latest adjudication per candidate of ``dataset``:
        ``{candidate_id: {"id", "value", "adjudicator", "note", "created_at"}}``."""
        with self.session_scope() as session:
            rows = session.scalars(
                select(AdjudicationRow)
                .where(AdjudicationRow.candidate_id.in_(candidates_of(session, dataset, CandidateRow.id)))
                .order_by(AdjudicationRow.id)
            )
            return {
                row.candidate_id: {
                    "id": row.id,
                    "value": row.value,
                    "adjudicator": row.adjudicator,
                    "note": row.note,
                    "created_at": row.created_at,
                }
                for row in rows
            }


class LastLabelUndo:
    """One undo: retracts ``annotator``'s latest current judgement, the same one on every attempt
    of ``StoreBase.retrying``.

    Two undos (the Ask/Compare judge panel's and the Label tab's) may pick the same latest label;
    the one that loses on the unique ``label_retractions.label_id`` runs again, and must then take
    back nothing rather than the next older label, which nobody asked to undo."""

    def __init__(self) -> None:
        self.picked: int | None = None  # the label an earlier attempt chose

    def retract(
        self, session: Session, annotator: str, dataset: str | None = None, holder: str | None = None,
        split: str | None = None,
    ) -> LabelRow | None:
        """Retract the latest current judgement (in ``dataset``, its ``split``, given by ``holder``
        where given) inside the caller's transaction and return it; ``None`` when there is none, or
        when the label an earlier attempt picked was retracted meanwhile by another undo."""
        if self.picked is not None and session.scalar(select(exists().where(LabelRetractionRow.label_id == self.picked))):
            return None
        query = select(LabelRow).where(LabelRow.annotator == annotator, not_retracted())
        if holder is not None:
            query = query.where(LabelRow.claim_id.in_(select(QueueClaimRow.id).where(QueueClaimRow.holder == holder)))
        if dataset is not None:
            candidates = candidates_of(session, dataset, CandidateRow.id)
            query = query.where(LabelRow.candidate_id.in_(candidates if split is None else candidates.where(QuestionRow.split == split)))
        label = session.scalars(query.order_by(LabelRow.id.desc()).limit(1)).first()
        if label is not None:
            self.picked = label.id
            session.execute(insert(LabelRetractionRow).values(label_id=label.id, annotator=annotator))
        return label

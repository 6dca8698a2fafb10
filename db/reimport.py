"""Writing a dataset into the store, first import or re-import alike, without losing or moving a
judgement.

A candidate's identity is its content, not its position. Its ``match_key`` is a hash of its
explicit (qid, doc_id) where the file has ids, else of its question and candidate text (with the
occurrence number when the same pair appears more than once), see ``match_key``. A re-import:

- updates every stored candidate whose key comes again in place (same row id), so its labels,
  retractions, adjudications and open queue claims stay on the same text; it may get another
  doc_id, question row or gold label from the file ("moved" when its (qid, doc_id) changed);
- brings back a candidate retired by an earlier import when its key returns ("revived");
- marks every current candidate whose key is gone ``retired_at`` ("retired"): it leaves the
  dataset's pools, queues, qrels and training data, but the row and its labels stay, listed by
  ``LabelStore.orphaned_labels`` and exported with the label history;
- inserts the rest ("new").

Questions are matched by (qid, text): a question whose text changed is a new question row, and
the old one is retired with the candidates left on it. Nothing is ever deleted, so a label written
by a concurrent session always has its candidate (no foreign-key error, nothing lost); the caller
runs all of this in the one transaction that also took the dataset's write lock.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import Session

from db.labeling import end_open_claims
from db.models import CandidateRow, LabelRow, QuestionRow, QueueClaimRow
from qa_core.types import Candidate, Dataset

ID_KEY, TEXT_KEY = "id:", "text:"


def match_key(qid: str, question: str, candidate: Candidate, occurrence: int) -> str:
    """The candidate's identity across imports (see the module docstring)."""
    if candidate.positional_id:
        digest = hashlib.sha256(json.dumps([question, candidate.text]).encode("utf-8")).hexdigest()
        return f"{TEXT_KEY}{digest[:40]}:{occurrence}"
    return ID_KEY + hashlib.sha256(json.dumps([qid, candidate.doc_id]).encode("utf-8")).hexdigest()[:40]


@dataclass
class ImportReport:
    """What an import did to the stored candidates (see the module docstring for the terms)."""

    dataset_id: int
    questions: int = 0
    candidates: int = 0
    new: int = 0
    matched: int = 0  # same content and same (qid, doc_id)
    moved: list[tuple[tuple[str, str], tuple[str, str]]] = field(default_factory=list)  # (old, new) ids
    edited: int = 0  # same explicit (qid, doc_id), other text: its labels stay with the id
    revived: int = 0
    retired: list[tuple[str, str, int]] = field(default_factory=list)  # (qid, doc_id, labels on it)
    # the edited candidates that hold labels, which judged the earlier text: (qid, doc_id, labels)
    edited_labelled: list[tuple[str, str, int]] = field(default_factory=list)

    @property
    def orphaned_labels(self) -> int:
        """Labels on the candidates this import retired: kept, no longer current."""
        return sum(labels for _, _, labels in self.retired)

    def summary(self) -> dict[str, int]:
        return {
            "questions": self.questions,
            "candidates": self.candidates,
            "new": self.new,
            "matched": self.matched,
            "moved": len(self.moved),
            "edited": self.edited,
            "revived": self.revived,
            "retired": len(self.retired),
            "orphaned_labels": self.orphaned_labels,
        }


def write_dataset(session: Session, ds: Dataset, dataset_id: int, at: datetime) -> ImportReport:
    """Make ``ds`` the current content of dataset ``dataset_id`` (see the module docstring)."""
    report = ImportReport(dataset_id, questions=len(ds.questions), candidates=sum(len(q.candidates) for q in ds.questions))
    question_ids = _write_questions(session, ds, dataset_id, at)
    stored = _read_stored(session, dataset_id)
    # Every current candidate is retired; those the file holds again come back in _write_candidates.
    session.execute(
        update(CandidateRow)
        .where(CandidateRow.question_id.in_(_question_ids(dataset_id)), CandidateRow.retired_at.is_(None))
        .values(retired_at=at)
    )
    used = _write_candidates(session, ds, question_ids, stored, at, report)
    gone = sorted(stored.active - used)
    if gone:
        _report_retired(session, dataset_id, stored, gone, at, report)
    return report


@dataclass
class _Stored:
    """The dataset's stored candidates, current and retired, as an import matches them."""

    by_key: dict[str, list[int]]  # see ``_keyed``
    active: set[int]  # the current ones' ids
    ids: dict[int, tuple[str, str]]  # (qid, doc_id) by row id
    texts: dict[int, str]
    edited_at: dict[int, datetime | None]


def _read_stored(session: Session, dataset_id: int) -> _Stored:
    old = session.execute(
        select(
            CandidateRow.id,
            CandidateRow.match_key,
            CandidateRow.retired_at,
            CandidateRow.doc_id,
            CandidateRow.text,
            CandidateRow.text_edited_at,
            QuestionRow.qid.label("qid"),
            QuestionRow.text.label("question"),
        )
        .join(QuestionRow, CandidateRow.question_id == QuestionRow.id)
        .where(QuestionRow.dataset_id == dataset_id)
        .order_by(CandidateRow.id)
    ).all()
    return _Stored(
        by_key=_keyed(old),
        active={row.id for row in old if row.retired_at is None},
        ids={row.id: (row.qid, row.doc_id) for row in old},
        texts={row.id: row.text for row in old},
        edited_at={row.id: row.text_edited_at for row in old},
    )


def _write_candidates(
    session: Session, ds: Dataset, question_ids: dict[str, int], stored: _Stored, at: datetime, report: ImportReport
) -> set[int]:
    """Update the stored candidates whose key comes again (same row, current again), insert the
    others, and count what happened in ``report``; returns the ids of the stored rows reused."""
    updates: list[dict[str, Any]] = []
    inserts: list[dict[str, Any]] = []
    used: set[int] = set()
    edited_ids: list[int] = []
    occurrences: Counter[tuple[str, str]] = Counter()
    for position, (question, candidate) in enumerate((q, c) for q in ds.questions for c in q.candidates):
        occurrence = occurrences[(question.text, candidate.text)]
        occurrences[(question.text, candidate.text)] += 1
        key = match_key(question.qid, question.text, candidate, occurrence)
        values = {**_candidate_values(candidate, question_ids[question.qid], key), "position": position}
        row_id = next((i for i in stored.by_key.get(key, ()) if i not in used), None)
        if row_id is None:
            inserts.append(values)
            continue
        used.add(row_id)
        text_changed = stored.texts[row_id] != candidate.text
        updates.append({"id": row_id, **values, "retired_at": None,
                        "text_edited_at": at if text_changed else stored.edited_at[row_id]})
        if row_id not in stored.active:
            report.revived += 1
        elif stored.ids[row_id] != (question.qid, candidate.doc_id):
            report.moved.append((stored.ids[row_id], (question.qid, candidate.doc_id)))
        else:
            report.matched += 1
        if text_changed:
            report.edited += 1
            edited_ids.append(row_id)
    if updates:
        session.execute(update(CandidateRow), updates)
    if inserts:
        session.execute(insert(CandidateRow), inserts)
    report.new = len(inserts)
    if edited_ids:
        labels = _label_counts(session, edited_ids)
        report.edited_labelled = [(*stored.ids[i], labels[i]) for i in edited_ids if i in labels]
    return used


def _report_retired(
    session: Session, dataset_id: int, stored: _Stored, gone: list[int], at: datetime, report: ImportReport
) -> None:
    """Count the labels on the candidates this import retired (``gone``), and end the queue's
    claims on them: a session holding one moves on to the next pair (a label it still sends is kept)."""
    # A subquery, not a list of ids: a whole dataset may leave, beyond SQLite's bound-parameter limit.
    retired_now = select(CandidateRow.id).where(
        CandidateRow.question_id.in_(_question_ids(dataset_id)), CandidateRow.retired_at == at
    )
    labels = _label_counts(session, retired_now)
    report.retired = [(*stored.ids[row_id], labels.get(row_id, 0)) for row_id in gone]
    end_open_claims(session, "released", QueueClaimRow.candidate_id.in_(retired_now), at=at)


def _label_counts(session: Session, candidate_ids: Any) -> dict[int, int]:
    """Labels (retracted ones included) per candidate among ``candidate_ids`` that have any."""
    return dict(
        session.execute(
            select(LabelRow.candidate_id, func.count())
            .where(LabelRow.candidate_id.in_(candidate_ids))
            .group_by(LabelRow.candidate_id)
        ).all()
    )


def _question_ids(dataset_id: int) -> Any:
    return select(QuestionRow.id).where(QuestionRow.dataset_id == dataset_id)


def _write_questions(session: Session, ds: Dataset, dataset_id: int, at: datetime) -> dict[str, int]:
    """Row id of every question of ``ds``: the stored row with the same qid and text (current
    first, else the latest retired one, revived), else a new row; the others are retired."""
    stored: dict[tuple[str, str], int] = {}
    for row_id, qid, text in session.execute(
        select(QuestionRow.id, QuestionRow.qid, QuestionRow.text)
        .where(QuestionRow.dataset_id == dataset_id)
        .order_by(QuestionRow.retired_at.is_(None), QuestionRow.id)  # current rows last: they win
    ):
        stored[(qid, text)] = row_id
    session.execute(
        update(QuestionRow).where(QuestionRow.dataset_id == dataset_id, QuestionRow.retired_at.is_(None)).values(retired_at=at)
    )
    updates, inserts = [], []
    for position, question in enumerate(ds.questions):
        row_id = stored.get((question.qid, question.text))
        if row_id is None:
            inserts.append(
                {"dataset_id": dataset_id, "qid": question.qid, "text": question.text, "split": question.split,
                 "position": position}
            )
        else:
            updates.append({"id": row_id, "split": question.split, "position": position, "retired_at": None})
    if updates:
        session.execute(update(QuestionRow), updates)
    if inserts:
        session.execute(insert(QuestionRow), inserts)
    return dict(
        session.execute(
            select(QuestionRow.qid, QuestionRow.id).where(QuestionRow.dataset_id == dataset_id, QuestionRow.retired_at.is_(None))
        ).all()
    )


def _keyed(old: list[Any]) -> dict[str, list[int]]:
    """Stored candidate ids by match key, best first: rows with their stored key (current before
    retired, then newest), then rows from before migration 0003, which had no key and so answer
    to both kinds (the file decides which kind it brings)."""
    keyed: dict[str, list[int]] = {}
    for row in sorted(old, key=lambda r: (r.retired_at is not None, -r.id)):
        if row.match_key is not None:
            keyed.setdefault(row.match_key, []).append(row.id)
    occurrences: Counter[tuple[str, str]] = Counter()
    for row in old:  # import order
        if row.match_key is None and row.retired_at is None:
            pair = (row.question, row.text)
            for candidate in (Candidate(row.doc_id, row.text), Candidate(row.doc_id, row.text, positional_id=True)):
                keyed.setdefault(match_key(row.qid, row.question, candidate, occurrences[pair]), []).append(row.id)
            occurrences[pair] += 1
    return keyed


def _candidate_values(candidate: Candidate, question_id: int, key: str) -> dict[str, Any]:
    return {
        "question_id": question_id,
        "doc_id": candidate.doc_id,
        "text": candidate.text,
        "source": candidate.source,
        "url": candidate.url,
        # int()/float(): importers may hand over numpy scalars, which psycopg cannot bind.
        "first_stage_rank": None if candidate.first_stage_rank is None else int(candidate.first_stage_rank),
        "first_stage_score": None if candidate.first_stage_score is None else float(candidate.first_stage_score),
        "gold_label": None if candidate.label is None else int(candidate.label),
        "match_key": key,
    }

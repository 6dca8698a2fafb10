"""Keeping a typed question: one question and its candidate pool added to a stored dataset.

Everything else that adds questions is an import of a whole file (``store.datasets.import_dataset``);
keeping adds one question beside the others and changes nothing already stored: no candidate is
retired, no run deleted, no label moved. The import's rules hold: ids as the store accepts them
(``check_name``), the right to import checked and the addition recorded in the audit trail inside
the write's transaction, and each candidate's ``match_key`` made as an import makes it, so that
an export imported again matches the kept question's candidates (and keeps their labels).

A question is kept once per dataset: another current question with the same text (case and
spacing aside) is returned instead. The dataset's stamp (``created_at``) moves, as an import
moves it, so that what the pages built from the old content (question lists, the BM25 collection)
is built again.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from sqlalchemy import func, insert, select, update

from db.audit import authorize, record
from db.base import StoreBase, check_name, dataset_row, insert_id, now
from db.models import CandidateRow, DatasetRow, QuestionRow
from db.reimport import _candidate_values, match_key
from qa_core.access import Actor, Permission
from qa_core.types import InputError, Question

KEPT_PREFIX = "kept-"


class KeptQuestion(NamedTuple):
    """Where a kept question is: ``added`` is False when the dataset held the text already."""

    qid: str
    split: str
    candidates: int
    added: bool


def question_key(text: str) -> str:
    """What makes two questions the same question (case and spacing aside)."""
    return " ".join(text.split()).casefold()


def kept_qid(text: str) -> str:
    """A kept question's id: stable for its text, so keeping it in another store gives the same id."""
    return KEPT_PREFIX + hashlib.sha256(question_key(text).encode("utf-8")).hexdigest()[:12]


class KeepStore(StoreBase):
    """Adding one question to a stored dataset (mixed into ``db.store.Store``)."""

    def keep_question(self, dataset: str, question: Question, *, actor: Actor | None = None) -> KeptQuestion:
        """Add ``question`` (its qid, split, text and candidates as given) to ``dataset``, or return
        the current question with the same text (see the module docstring)."""
        qid = check_name(question.qid, "the kept question's id")
        split = check_name(question.split, "the kept question's split")
        doc_ids = [check_name(c.doc_id, f"the id of candidate {n}") for n, c in enumerate(question.candidates, 1)]
        if not doc_ids:
            raise InputError("a kept question needs at least one candidate")
        if len(set(doc_ids)) != len(doc_ids):
            raise InputError("a kept question's candidate ids must differ from each other")
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.IMPORT, team=self.team)
            kept_in = dataset_row(session, dataset)
            dataset_id, stamp = kept_in.id, kept_in.created_at
            at = now()  # the stamp moves first: the write lock, so two keeps of one text cannot both add it
            session.execute(update(DatasetRow).where(DatasetRow.id == dataset_id).values(created_at=at))
            current = session.execute(
                select(QuestionRow.id, QuestionRow.qid, QuestionRow.text, QuestionRow.split)
                .where(QuestionRow.dataset_id == dataset_id, QuestionRow.retired_at.is_(None))
            ).all()
            key = question_key(question.text)
            same = next((row for row in current if question_key(row.text) == key), None)
            if same is not None:  # nothing added: the stamp goes back (the pages' caches stay valid)
                session.execute(update(DatasetRow).where(DatasetRow.id == dataset_id).values(created_at=stamp))
                count = session.scalar(select(func.count()).where(CandidateRow.question_id == same.id,
                                                                  CandidateRow.retired_at.is_(None)))
                return KeptQuestion(same.qid, same.split, count or 0, added=False)
            if any(row.qid == qid for row in current):
                raise InputError(f"dataset {dataset!r} already has a question with id {qid!r}")
            last = session.scalar(
                select(func.max(CandidateRow.position)).join(QuestionRow).where(QuestionRow.dataset_id == dataset_id)
            )
            question_id = insert_id(
                session, QuestionRow, dataset_id=dataset_id, qid=qid, text=question.text, split=split,
                position=len(current),
            )
            start = (last or 0) + 1
            session.execute(insert(CandidateRow), [
                {**_candidate_values(candidate, question_id, match_key(qid, question.text, candidate, 0)),
                 "position": start + n}
                for n, candidate in enumerate(question.candidates)
            ])
            record(session, who, "keep question", f"{dataset} {qid}",
                   {"question": question.text, "split": split, "candidates": len(doc_ids)})
            return KeptQuestion(qid, split, len(doc_ids), added=True)

"""Persistence of the datasets and imports context: importing a dataset (matched to the stored one
by content, ``db/reimport.py``), reading it back whole, as a stream or by ids, its counts, a
first-stage run on its candidates, deleting it.

Every public method runs in its own transaction (``session_scope``); bad input raises
``InputError`` and leaves the database unchanged.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.audit import authorize, record
from db.base import (
    CandidateRecord,
    StoreBase,
    candidate_ids,
    candidates_of,
    check_name,
    current_label_ids,
    dataset_row,
    insert_id,
    now,
)
from db.models import CandidateRow, DatasetRow, LabelRow, QuestionRow, RunRow
from db.reimport import TEXT_KEY, ImportReport, write_dataset
from qa_core import names
from qa_core.access import Actor, Permission
from qa_core.text.normalise import visible_text
from qa_core.types import Candidate, Dataset, InputError, Question

# Two first imports of one new name race on its unique constraint; the loser tries again (and
# then finds the dataset: "already exists", or a re-import with replace).
IMPORT_ATTEMPTS = 3
# Rows per fetch when a whole collection is read as a stream (``candidate_texts``).
STREAM_ROWS = 10_000


class DatasetStore(StoreBase):
    """The datasets, their questions and candidates: what an import writes and every page reads."""


    def import_dataset(self, ds: Dataset, replace: bool = False, *, actor: Actor | None = None) -> ImportReport:
        """Store ``ds`` in one transaction and report what happened to the stored candidates.

        An existing name is an error unless ``replace``. Importing again matches candidates to
        the stored ones by content (``db/reimport.py``): labels, retractions and adjudications
        stay on the same text, nothing is deleted, and candidates that left the file are retired
        with their labels kept (``orphaned_labels``). The dataset's runs are deleted (their scores
        were for the old content). The transaction starts by writing the dataset row, which takes
        the write lock: concurrent labelling waits for it (SQLite) or goes on beside it
        (PostgreSQL), and every label it writes keeps its candidate. ``Candidate.label`` becomes
        ``gold_label``.
        """
        _validate_dataset(ds)

        def write(session: Session) -> ImportReport:
            who = authorize(session, actor, Permission.IMPORT, team=self.team)
            report = self._import_dataset(session, ds, replace)
            record(session, who, "import", ds.name, {"replace": replace, "source": ds.source, **report.summary()})
            return report

        try:
            return self.retrying(write, IMPORT_ATTEMPTS)
        except IntegrityError as error:  # concurrent first imports of the same name kept winning the race
            raise InputError(f"dataset {ds.name!r} could not be stored: {error.orig}") from error

    @staticmethod
    def _import_dataset(session: Session, ds: Dataset, replace: bool) -> ImportReport:
        at = now()
        dataset_id = session.scalar(
            update(DatasetRow)
            .where(DatasetRow.name == ds.name)
            .values(source=ds.source, created_at=at)
            .returning(DatasetRow.id)
        )
        if dataset_id is None:
            dataset_id = insert_id(session, DatasetRow, name=ds.name, source=ds.source, created_at=at)
        elif not replace:
            raise InputError(f"dataset {ds.name!r} already exists (use replace to import it again)")
        else:
            session.execute(delete(RunRow).where(RunRow.dataset_id == dataset_id))
        return write_dataset(session, ds, dataset_id, at)

    def dataset_names(self) -> list[str]:
        with self.session_scope() as session:
            return list(session.scalars(select(DatasetRow.name).order_by(DatasetRow.name)))

    def dataset_stamp(self, name: str) -> tuple[int, Any]:
        """(row id, created_at) of the dataset: changes on every (re-)import, kept question and run. One indexed lookup,
        cheap enough for a cache key checked on every request (``dataset_summary`` counts rows)."""
        with self.session_scope() as session:
            row = session.execute(select(DatasetRow.id, DatasetRow.created_at).where(DatasetRow.name == name)).first()
            if row is None:
                dataset_row(session, name)  # raises InputError naming the known datasets
            return row.id, row.created_at

    def dataset_summary(self, name: str) -> dict[str, Any]:
        """Counts for the dataset page: questions per split, candidates, gold positives, labelled
        (candidates with at least one current, i.e. unretracted, label)."""
        with self.session_scope() as session:
            dataset = dataset_row(session, name)
            per_split = dict(
                session.execute(
                    select(QuestionRow.split, func.count())
                    .where(QuestionRow.dataset_id == dataset.id, QuestionRow.retired_at.is_(None))
                    .group_by(QuestionRow.split)
                    .order_by(QuestionRow.split)
                )
                .all()
            )
            candidates = candidates_of(session, name, CandidateRow.id, CandidateRow.gold_label).subquery()
            total, positives = session.execute(
                select(func.count(), func.count().filter(candidates.c.gold_label > 0))
            ).one()
            labelled = session.scalar(
                select(func.count(func.distinct(LabelRow.candidate_id))).where(
                    LabelRow.id.in_(current_label_ids(select(candidates.c.id)))
                )
            )
            orphaned = session.scalar(
                select(func.count(LabelRow.id)).where(
                    LabelRow.candidate_id.in_(
                        candidates_of(session, name, CandidateRow.id, retired=True).where(
                            CandidateRow.retired_at.is_not(None)
                        )
                    )
                )
            )
            return {
                "name": dataset.name,
                "source": dataset.source,
                "created_at": dataset.created_at,
                "questions": per_split,
                "candidates": total,
                "positives": positives,
                "labelled": labelled,
                "orphaned_labels": orphaned,
            }

    def delete_dataset(self, name: str, *, actor: Actor | None = None) -> None:
        """Delete the dataset with its questions, candidates, labels and runs: the one operation
        that removes judgements, so only on an explicit request (no re-import does)."""
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.IMPORT, team=self.team)
            session.execute(delete(DatasetRow).where(DatasetRow.id == dataset_row(session, name).id))
            record(session, who, "delete_dataset", name)

    def load_dataset(self, name: str, split: str | None = None) -> Dataset:
        """Rebuild the in-memory dataset (gold labels in ``Candidate.label``), in import order;
        texts as shown and tokenised (``qa_core.text.normalise``: direction controls and zero-width
        characters neutralised), the stored texts unchanged."""
        with self.session_scope() as session:
            dataset = dataset_row(session, name)
            question_query = select(QuestionRow).where(
                QuestionRow.dataset_id == dataset.id, QuestionRow.retired_at.is_(None)
            )
            if split is not None:
                question_query = question_query.where(QuestionRow.split == split)
            questions = {
                row.id: Question(qid=row.qid, text=visible_text(row.text), split=row.split)
                for row in session.scalars(question_query.order_by(QuestionRow.position, QuestionRow.id))
            }
            candidate_query = (
                select(CandidateRow)
                .join(QuestionRow, CandidateRow.question_id == QuestionRow.id)
                .where(QuestionRow.dataset_id == dataset.id, CandidateRow.retired_at.is_(None))
                .order_by(CandidateRow.position, CandidateRow.id)
            )
            if split is not None:
                candidate_query = candidate_query.where(QuestionRow.split == split)
            for row in session.scalars(candidate_query):
                questions[row.question_id].candidates.append(
                    Candidate(
                        doc_id=row.doc_id,
                        text=visible_text(row.text),
                        label=row.gold_label,
                        first_stage_rank=row.first_stage_rank,
                        first_stage_score=row.first_stage_score,
                        source=row.source,
                        url=row.url,
                        positional_id=(row.match_key or "").startswith(TEXT_KEY),
                    )
                )
            return Dataset(name=dataset.name, questions=list(questions.values()), source=dataset.source)

    def candidate_texts(self, name: str) -> Iterator[tuple[str, str, str, str, str | None]]:
        """``(qid, doc_id, text, source, url)`` of the dataset's current candidates in ``load_dataset``'s
        order (texts as shown and tokenised, as there), streamed from one column projection: what a
        collection's index needs (source and url say which document a sentence came from), without
        building the dataset's question and candidate objects."""
        with self.session_scope() as session:
            query = candidates_of(
                session, name, QuestionRow.qid, CandidateRow.doc_id, CandidateRow.text, CandidateRow.source, CandidateRow.url
            ).order_by(QuestionRow.position, QuestionRow.id, CandidateRow.position, CandidateRow.id)
            for qid, doc_id, text, source, url in session.execute(query.execution_options(yield_per=STREAM_ROWS)):
                yield qid, doc_id, visible_text(text), source, url

    def candidates_by_id(self, name: str, ids: Collection[tuple[str, str]]) -> dict[tuple[str, str], Candidate]:
        """The current candidates of the given ``(qid, doc_id)`` pairs (those that exist), keyed by
        them, without gold labels: a search's top n, read through the qid and question indexes."""
        if not ids:
            return {}
        with self.session_scope() as session:
            rows = session.execute(
                candidates_of(
                    session, name, QuestionRow.qid, CandidateRow.doc_id, CandidateRow.text, CandidateRow.source, CandidateRow.url
                ).where(QuestionRow.qid.in_({qid for qid, _ in ids}), CandidateRow.doc_id.in_({doc_id for _, doc_id in ids}))
            )
            return {
                (row.qid, row.doc_id): Candidate(row.doc_id, visible_text(row.text), source=row.source, url=row.url)
                for row in rows
                if (row.qid, row.doc_id) in ids  # the two IN lists also match pairs across questions
            }

    def find_candidate_id(self, dataset: str, qid: str, doc_id: str) -> int:
        with self.session_scope() as session:
            candidate_id = session.scalar(
                candidates_of(session, dataset, CandidateRow.id).where(
                    QuestionRow.qid == qid, CandidateRow.doc_id == doc_id
                )
            )
            if candidate_id is None:
                raise InputError(f"dataset {dataset!r} has no candidate {doc_id!r} for question {qid!r}")
            return candidate_id

    def candidate_rows(self, dataset: str, split: str | None = None) -> list[CandidateRecord]:
        """All candidates with their question text, in import order."""
        with self.session_scope() as session:
            query = candidates_of(
                session,
                dataset,
                CandidateRow.id,
                QuestionRow.qid,
                CandidateRow.doc_id,
                QuestionRow.text,
                CandidateRow.text,
                CandidateRow.gold_label,
            ).order_by(CandidateRow.position, CandidateRow.id)
            if split is not None:
                query = query.where(QuestionRow.split == split)
            return [CandidateRecord(row[0], row[1], row[2], visible_text(row[3]), visible_text(row[4]), row[5])
                    for row in session.execute(query)]

    def set_first_stage(
        self,
        dataset: str,
        run: Mapping[str, Sequence[tuple[str, int, float]]],
        *,
        lines: Mapping[tuple[str, str], int] | None = None,
        path: str | None = None,
        actor: Actor | None = None,
    ) -> int:
        """Store a first-stage TREC run's (doc_id, rank, score) on existing candidates.

        Every (qid, doc_id) must exist, else nothing is written; with the file's ``path`` and
        ``lines`` ((qid, doc_id) -> line) the error names them. Returns the candidates updated.
        The dataset's stamp (``created_at``) moves, as an import's: it is the key of the pages'
        caches of its questions and runs, which would keep the old first-stage ranks.
        """
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.IMPORT, team=self.team)
            row = dataset_row(session, dataset)
            ids = candidate_ids(session, row.id)
            pairs = [(qid, doc_id, rank, score) for qid, entries in run.items() for doc_id, rank, score in entries]
            missing = [(qid, doc_id) for qid, doc_id, _, _ in pairs if (qid, doc_id) not in ids]
            if missing:  # the first in the file is named (the run is ordered by score, not by line)
                qid, doc_id = min(missing, key=lambda pair: (lines or {}).get(pair, 0))
                raise InputError(f"dataset {dataset!r} has no candidate {doc_id!r} for question {qid!r}",
                                 path=path, line=(lines or {}).get((qid, doc_id)))
            updates = [{"id": ids[(qid, doc_id)], "first_stage_rank": int(rank), "first_stage_score": float(score)}
                       for qid, doc_id, rank, score in pairs]
            if updates:
                session.execute(update(CandidateRow), updates)
                row.created_at = now()
            record(session, who, "import_run", dataset, {"candidates": len(updates)})
            return len(updates)


def _validate_dataset(ds: Dataset) -> None:
    """Reject what the database would reject (unique ids, names and ids too long for its indexes,
    NUL characters, which PostgreSQL cannot store) and what no importer lets through (ranks below
    1, one text with two gold labels in a question), with a message naming the culprit."""
    name = names.check_name(ds.name, "dataset name")
    _check_texts(f"dataset {name!r}", source=ds.source)
    seen_qids: set[str] = set()
    for number, question in enumerate(ds.questions, start=1):
        check_name(question.qid, f"dataset {name!r}: the id of question {number}")
        where = f"dataset {name!r}, question {question.qid!r}"
        names.check_name(question.split, f"split ({where})")
        _check_texts(where, question=question.text)
        if question.qid in seen_qids:
            raise InputError(f"dataset {name!r}: question id {question.qid!r} appears twice")
        seen_qids.add(question.qid)
        seen_docs: set[str] = set()
        gold: dict[str, int | None] = {}
        for position, candidate in enumerate(question.candidates, start=1):
            check_name(candidate.doc_id, f"{where}: the id of candidate {position}")
            _check_texts(f"{where}, candidate {candidate.doc_id!r}", text=candidate.text, source=candidate.source,
                         url=candidate.url)
            if candidate.doc_id in seen_docs:
                raise InputError(
                    f"dataset {name!r}: candidate {candidate.doc_id!r} appears twice in question {question.qid!r}"
                )
            seen_docs.add(candidate.doc_id)
            if candidate.first_stage_rank is not None and int(candidate.first_stage_rank) < 1:
                raise InputError(
                    f"{where}, candidate {candidate.doc_id!r}: first-stage rank must be 1 or more, "
                    f"got {candidate.first_stage_rank}"
                )
            if gold.setdefault(candidate.text, candidate.label) != candidate.label:
                raise InputError(
                    f"{where}: candidate {candidate.doc_id!r} repeats the text of another candidate with gold label "
                    f"{gold[candidate.text]}, but has {candidate.label}"
                )


def _check_texts(where: str, **texts: str | None) -> None:
    for what, text in texts.items():
        if text is not None and "\x00" in text:
            raise InputError(f"{where}: the {what} holds a NUL character, which the store cannot keep")

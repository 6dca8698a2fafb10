"""The store API: datasets, labels (append-only), model registry and evaluation runs, plus the
labelling queue and review (``db/labeling.py``) and training jobs (``db/jobs.py``).

Every public method runs in its own session and transaction (``session_scope``), so one ``Store``
can be shared by Streamlit threads and background jobs. Bad input raises ``InputError`` and leaves
the database unchanged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.base import (
    MAX_LABEL,
    MIN_LABEL,
    CandidateRecord,
    LabelRecord,
    candidates_of,
    check_annotator,
    check_grade,
    clear_promoted,
    current_label_ids,
    dataset_row,
    insert_model_version,
    jsonable,
    model_dict,
    now,
)
from db.jobs import JobStore
from db.labeling import LabelingStore
from db.models import (
    AdjudicationRow,
    CandidateRow,
    DatasetRow,
    LabelRetractionRow,
    LabelRow,
    ModelVersionRow,
    QuestionRow,
    RunRow,
    RunScoreRow,
)
from qa_core.data.exporters import write_jsonl, write_qrels
from qa_core.types import Candidate, Dataset, InputError, Question

__all__ = ["MAX_LABEL", "MIN_LABEL", "CandidateRecord", "LabelRecord", "Store"]

QRELS_SOURCES = ("labels", "gold")
# Concurrent registrations of one model name can pick the same next version; the unique
# constraint rejects all but one and the others retry.
REGISTER_ATTEMPTS = 5
T = TypeVar("T")


class Store(LabelingStore, JobStore):
    """Persistent store over SQLite or PostgreSQL; the schema is migrated on construction."""

    # ------------------------------------------------------------------ datasets

    def import_dataset(self, ds: Dataset, replace: bool = False) -> int:
        """Store ``ds`` in one transaction and return its id.

        An existing name is an error unless ``replace``; replacing deletes the old dataset (and
        its runs) but carries the label history (with retractions) and the adjudications over to
        candidates that keep their (qid, doc_id), so annotation work survives a re-import. Open
        queue claims are dropped. ``Candidate.label`` becomes ``gold_label``.
        """
        _validate_dataset(ds)
        try:
            return self._import_dataset(ds, replace)
        except IntegrityError as error:  # a concurrent import of the same name won the race
            raise InputError(f"dataset {ds.name!r} could not be stored: {error.orig}") from error

    def _import_dataset(self, ds: Dataset, replace: bool) -> int:
        with self.session_scope() as session:
            old_id = session.scalar(select(DatasetRow.id).where(DatasetRow.name == ds.name))
            carried = _CarriedWork()
            if old_id is not None:
                if not replace:
                    raise InputError(f"dataset {ds.name!r} already exists (use replace to overwrite it)")
                carried = _CarriedWork.read(session, old_id)
                session.execute(delete(DatasetRow).where(DatasetRow.id == old_id))
            dataset_id = session.scalar(
                insert(DatasetRow).values(name=ds.name, source=ds.source).returning(DatasetRow.id)
            )
            if ds.questions:
                session.execute(
                    insert(QuestionRow),
                    [{"dataset_id": dataset_id, "qid": q.qid, "text": q.text, "split": q.split} for q in ds.questions],
                )
            question_ids = dict(
                session.execute(select(QuestionRow.qid, QuestionRow.id).where(QuestionRow.dataset_id == dataset_id)).all()
            )
            candidate_rows = [
                {
                    "question_id": question_ids[q.qid],
                    "doc_id": c.doc_id,
                    "text": c.text,
                    "source": c.source,
                    "url": c.url,
                    # int()/float(): importers may hand over numpy scalars, which psycopg cannot bind.
                    "first_stage_rank": _optional(int, c.first_stage_rank),
                    "first_stage_score": _optional(float, c.first_stage_score),
                    "gold_label": _optional(int, c.label),
                }
                for q in ds.questions
                for c in q.candidates
            ]
            if candidate_rows:
                session.execute(insert(CandidateRow), candidate_rows)
            carried.write(session, _candidate_ids(session, dataset_id))
            return dataset_id

    def dataset_names(self) -> list[str]:
        with self.session_scope() as session:
            return list(session.scalars(select(DatasetRow.name).order_by(DatasetRow.name)))

    def dataset_stamp(self, name: str) -> tuple[int, Any]:
        """(row id, created_at) of the dataset: changes on every (re-)import. One indexed lookup,
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
                    .where(QuestionRow.dataset_id == dataset.id)
                    .group_by(QuestionRow.split)
                    .order_by(QuestionRow.split)
                )
                .all()
            )
            candidates = (
                select(CandidateRow.id, CandidateRow.gold_label)
                .join(QuestionRow, CandidateRow.question_id == QuestionRow.id)
                .where(QuestionRow.dataset_id == dataset.id)
                .subquery()
            )
            total, positives = session.execute(
                select(func.count(), func.count().filter(candidates.c.gold_label > 0))
            ).one()
            labelled = session.scalar(
                select(func.count(func.distinct(LabelRow.candidate_id))).where(
                    LabelRow.id.in_(current_label_ids(select(candidates.c.id)))
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
            }

    def delete_dataset(self, name: str) -> None:
        """Delete the dataset with its questions, candidates, labels and runs."""
        with self.session_scope() as session:
            session.execute(delete(DatasetRow).where(DatasetRow.id == dataset_row(session, name).id))

    def load_dataset(self, name: str, split: str | None = None) -> Dataset:
        """Rebuild the in-memory dataset (gold labels in ``Candidate.label``), in import order."""
        with self.session_scope() as session:
            dataset = dataset_row(session, name)
            question_query = select(QuestionRow).where(QuestionRow.dataset_id == dataset.id)
            if split is not None:
                question_query = question_query.where(QuestionRow.split == split)
            questions = {
                row.id: Question(qid=row.qid, text=row.text, split=row.split)
                for row in session.scalars(question_query.order_by(QuestionRow.id))
            }
            candidate_query = (
                select(CandidateRow)
                .join(QuestionRow, CandidateRow.question_id == QuestionRow.id)
                .where(QuestionRow.dataset_id == dataset.id)
                .order_by(CandidateRow.id)
            )
            if split is not None:
                candidate_query = candidate_query.where(QuestionRow.split == split)
            for row in session.scalars(candidate_query):
                questions[row.question_id].candidates.append(
                    Candidate(
                        doc_id=row.doc_id,
                        text=row.text,
                        label=row.gold_label,
                        first_stage_rank=row.first_stage_rank,
                        first_stage_score=row.first_stage_score,
                        source=row.source,
                        url=row.url,
                    )
                )
            return Dataset(name=dataset.name, questions=list(questions.values()), source=dataset.source)

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
            ).order_by(CandidateRow.id)
            if split is not None:
                query = query.where(QuestionRow.split == split)
            return [CandidateRecord(*row) for row in session.execute(query)]

    def set_first_stage(self, dataset: str, run: Mapping[str, Sequence[tuple[str, int, float]]]) -> int:
        """Store a first-stage TREC run's (doc_id, rank, score) on existing candidates.

        Every (qid, doc_id) must exist, else nothing is written. Returns the candidates updated.
        """
        with self.session_scope() as session:
            ids = _candidate_ids(session, dataset_row(session, dataset).id)
            updates = []
            for qid, entries in run.items():
                for doc_id, rank, score in entries:
                    if (qid, doc_id) not in ids:
                        raise InputError(f"dataset {dataset!r} has no candidate {doc_id!r} for question {qid!r}")
                    updates.append(
                        {"id": ids[(qid, doc_id)], "first_stage_rank": int(rank), "first_stage_score": float(score)}
                    )
            if updates:
                session.execute(update(CandidateRow), updates)
            return len(updates)

    # ------------------------------------------------------------------ labels

    def add_label(self, candidate_id: int, annotator: str, value: int, note: str | None = None) -> int:
        """Append a graded judgement (0..4) and return its id; earlier ones stay as history."""
        annotator, value = check_annotator(annotator), check_grade(value)
        with self.session_scope() as session:
            if session.get(CandidateRow, candidate_id) is None:
                raise InputError(f"no candidate with id {candidate_id}")
            return session.scalar(
                insert(LabelRow)
                .values(candidate_id=candidate_id, annotator=annotator, value=value, note=note)
                .returning(LabelRow.id)
            )

    def import_qrels(self, dataset: str, qrels: Mapping[str, Mapping[str, int]], annotator: str) -> int:
        """Append every qrels judgement as a label by ``annotator``, in one transaction.

        An unknown (qid, doc_id) or a grade outside 0..4 rejects the whole file. Returns the labels added.
        """
        if not annotator.strip():
            raise InputError("annotator name is empty")
        with self.session_scope() as session:
            ids = _candidate_ids(session, dataset_row(session, dataset).id)
            rows = []
            for qid, grades in qrels.items():
                for doc_id, grade in grades.items():
                    if (qid, doc_id) not in ids:
                        raise InputError(f"dataset {dataset!r} has no candidate {doc_id!r} for question {qid!r}")
                    if not MIN_LABEL <= int(grade) <= MAX_LABEL:
                        raise InputError(
                            f"grade {grade} of ({qid}, {doc_id}) is outside {MIN_LABEL}..{MAX_LABEL}"
                        )
                    rows.append({"candidate_id": ids[(qid, doc_id)], "annotator": annotator.strip(), "value": int(grade)})
            if rows:
                session.execute(insert(LabelRow), rows)
            return len(rows)

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
            for qid, doc_id, grade in session.execute(query.order_by(QuestionRow.id, CandidateRow.id)):
                result.setdefault(qid, {})[doc_id] = grade
            return result

    def export_qrels(self, dataset: str, path: str | Path, source: str = "labels") -> int:
        """Write TREC qrels (``qid 0 doc_id grade``) atomically; returns the lines written."""
        return write_qrels(self.qrels(dataset, source), path)

    def export_labels_jsonl(self, dataset: str, path: str | Path) -> int:
        """Write the full label history, one JSON object per judgement, atomically
        (``retracted_at`` is null unless the judgement was undone)."""
        with self.session_scope() as session:
            rows = session.execute(
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
                )
                .join(LabelRow, LabelRow.candidate_id == CandidateRow.id)
                .outerjoin(LabelRetractionRow, LabelRetractionRow.label_id == LabelRow.id)
                .order_by(LabelRow.id)
            ).all()
        keys = ("qid", "doc_id", "question", "candidate", "annotator", "value", "note", "created_at", "retracted_at")
        return write_jsonl(
            (dict(zip(keys, (*row[:-2], *(None if t is None else t.isoformat() for t in row[-2:])))) for row in rows),
            path,
        )

    # ------------------------------------------------------------------ model registry

    def register_model(
        self,
        name: str,
        kind: str,
        checkpoint_path: str | Path,
        training_data: dict[str, Any],
        metrics: dict[str, Any],
        promote: bool = False,
    ) -> int:
        """Record the next version of model ``name`` and return its ``model_versions`` id."""
        attempt = 0
        while True:
            attempt += 1
            try:
                with self.session_scope() as session:
                    return insert_model_version(session, name, kind, checkpoint_path, training_data, metrics, promote)
            except IntegrityError:
                if attempt >= REGISTER_ATTEMPTS:
                    raise

    def model_versions(self, name: str | None = None) -> list[dict[str, Any]]:
        """Registered versions, by name then version."""
        with self.session_scope() as session:
            query = select(ModelVersionRow).order_by(ModelVersionRow.name, ModelVersionRow.version)
            if name is not None:
                query = query.where(ModelVersionRow.name == name)
            return [model_dict(row) for row in session.scalars(query)]

    def promoted_model(self, name: str) -> dict[str, Any] | None:
        """The promoted version of ``name``, else its newest, else ``None``."""
        with self.session_scope() as session:
            row = session.scalars(
                select(ModelVersionRow)
                .where(ModelVersionRow.name == name)
                .order_by(ModelVersionRow.promoted.desc(), ModelVersionRow.version.desc())
                .limit(1)
            ).first()
            return None if row is None else model_dict(row)

    def model_version(self, version_id: int) -> dict[str, Any]:
        """One registered version by its ``model_versions`` id."""
        with self.session_scope() as session:
            row = session.get(ModelVersionRow, version_id)
            if row is None:
                raise InputError(f"no model version with id {version_id}")
            return model_dict(row)

    def promote(self, name: str, version: int) -> None:
        """Make ``version`` the one promoted version of ``name`` (any version: also how to roll back)."""
        with self.session_scope() as session:
            row = session.scalars(
                select(ModelVersionRow).where(ModelVersionRow.name == name, ModelVersionRow.version == version)
            ).first()
            if row is None:
                raise InputError(f"model {name!r} has no version {version}")
            clear_promoted(session, name)
            session.execute(
                update(ModelVersionRow).where(ModelVersionRow.id == row.id).values(promoted=True, promoted_at=now())
            )

    def rollback_target(self, name: str) -> dict[str, Any] | None:
        """The version of ``name`` that ``rollback`` would promote again, or None when no other
        version was ever promoted (the Train page labels and enables its button with this)."""
        with self.session_scope() as session:
            row = self._rollback_row(session, name)
            return None if row is None else model_dict(row)

    def rollback(self, name: str) -> dict[str, Any]:
        """Promote again the version of ``name`` that was promoted most recently before the current
        one, and return it; ``InputError`` when no other version was ever promoted."""
        with self.session_scope() as session:
            row = self._rollback_row(session, name)
            if row is None:
                raise InputError(f"model {name!r} has no earlier promoted version to roll back to")
            clear_promoted(session, name)
            session.execute(
                update(ModelVersionRow).where(ModelVersionRow.id == row.id).values(promoted=True, promoted_at=now())
            )
            session.refresh(row)
            return model_dict(row)

    @staticmethod
    def _rollback_row(session: Session, name: str) -> ModelVersionRow | None:
        return session.scalars(
            select(ModelVersionRow)
            .where(
                ModelVersionRow.name == name,
                ModelVersionRow.promoted.is_(False),
                ModelVersionRow.promoted_at.is_not(None),
            )
            .order_by(ModelVersionRow.promoted_at.desc(), ModelVersionRow.id.desc())
            .limit(1)
        ).first()

    # ------------------------------------------------------------------ runs

    def save_run(
        self,
        dataset: str,
        split: str | None,
        scores: Mapping[str, Mapping[str, float]],
        metrics: dict[str, Any],
        model_version_id: int | None = None,
        tag: str = "",
    ) -> int:
        """Store a scored run (ranks: score descending, ties by doc_id) and return its id."""
        with self.session_scope() as session:
            dataset_id = dataset_row(session, dataset).id
            if model_version_id is not None and session.get(ModelVersionRow, model_version_id) is None:
                raise InputError(f"no model version with id {model_version_id}")
            ids = _candidate_ids(session, dataset_id)
            run_id = session.scalar(
                insert(RunRow)
                .values(
                    dataset_id=dataset_id,
                    split=split,
                    tag=tag,
                    metrics=jsonable(metrics),
                    model_version_id=model_version_id,
                )
                .returning(RunRow.id)
            )
            rows = []
            for qid, doc_scores in scores.items():
                ranked = sorted(doc_scores.items(), key=lambda item: (-item[1], item[0]))
                for rank, (doc_id, score) in enumerate(ranked, start=1):
                    if (qid, doc_id) not in ids:
                        raise InputError(f"dataset {dataset!r} has no candidate {doc_id!r} for question {qid!r}")
                    rows.append(
                        {"run_id": run_id, "candidate_id": ids[(qid, doc_id)], "score": float(score), "rank": rank}
                    )
            if rows:
                session.execute(insert(RunScoreRow), rows)
            return run_id

    def load_run(self, run_id: int) -> dict[str, dict[str, float]]:
        """``{qid: {doc_id: score}}`` of a saved run."""
        with self.session_scope() as session:
            if session.get(RunRow, run_id) is None:
                raise InputError(f"no run with id {run_id}")
            rows = session.execute(
                select(QuestionRow.qid, CandidateRow.doc_id, RunScoreRow.score)
                .join(CandidateRow, RunScoreRow.candidate_id == CandidateRow.id)
                .join(QuestionRow, CandidateRow.question_id == QuestionRow.id)
                .where(RunScoreRow.run_id == run_id)
                .order_by(QuestionRow.id, RunScoreRow.rank)
            )
            result: dict[str, dict[str, float]] = {}
            for qid, doc_id, score in rows:
                result.setdefault(qid, {})[doc_id] = score
            return result

    def runs(self, dataset: str | None = None) -> list[dict[str, Any]]:
        """Saved runs, newest first, with their dataset and model names."""
        with self.session_scope() as session:
            query = (
                select(RunRow, DatasetRow.name, ModelVersionRow.name, ModelVersionRow.version)
                .join(DatasetRow, RunRow.dataset_id == DatasetRow.id)
                .outerjoin(ModelVersionRow, RunRow.model_version_id == ModelVersionRow.id)
                .order_by(RunRow.id.desc())
            )
            if dataset is not None:
                query = query.where(RunRow.dataset_id == dataset_row(session, dataset).id)
            return [
                {
                    "id": run.id,
                    "dataset": dataset_name,
                    "split": run.split,
                    "tag": run.tag,
                    "created_at": run.created_at,
                    "metrics": run.metrics,
                    "model_version_id": run.model_version_id,
                    "model": model_name,
                    "model_version": model_version,
                }
                for run, dataset_name, model_name, model_version in session.execute(query)
            ]


# ---------------------------------------------------------------------- helpers


def _validate_dataset(ds: Dataset) -> None:
    """Reject what the unique constraints would reject, with a message naming the culprit."""
    if not ds.name or not ds.name.strip():
        raise InputError("dataset name is empty")
    seen_qids: set[str] = set()
    for question in ds.questions:
        if question.qid in seen_qids:
            raise InputError(f"dataset {ds.name!r}: question id {question.qid!r} appears twice")
        seen_qids.add(question.qid)
        seen_docs: set[str] = set()
        for candidate in question.candidates:
            if candidate.doc_id in seen_docs:
                raise InputError(
                    f"dataset {ds.name!r}: candidate {candidate.doc_id!r} appears twice in question {question.qid!r}"
                )
            seen_docs.add(candidate.doc_id)


def _optional(convert: Callable[[Any], T], value: Any) -> T | None:
    return None if value is None else convert(value)


def _candidate_ids(session: Session, dataset_id: int) -> dict[tuple[str, str], int]:
    rows = session.execute(
        select(QuestionRow.qid, CandidateRow.doc_id, CandidateRow.id)
        .join(QuestionRow, CandidateRow.question_id == QuestionRow.id)
        .where(QuestionRow.dataset_id == dataset_id)
    )
    return {(qid, doc_id): candidate_id for qid, doc_id, candidate_id in rows}


class _CarriedWork:
    """Labels (with retractions) and adjudications of a dataset being replaced, keyed by
    (qid, doc_id), to be written again onto the new dataset's candidates that keep those keys."""

    def __init__(self) -> None:
        self.labels: list[tuple[tuple[str, str], dict[str, Any], dict[str, Any] | None]] = []
        self.adjudications: list[tuple[tuple[str, str], dict[str, Any]]] = []

    @classmethod
    def read(cls, session: Session, dataset_id: int) -> _CarriedWork:
        carried = cls()
        keyed = (
            select(QuestionRow.qid, CandidateRow.doc_id)
            .join(QuestionRow, CandidateRow.question_id == QuestionRow.id)
            .where(QuestionRow.dataset_id == dataset_id)
        )
        labels = session.execute(
            keyed.add_columns(LabelRow, LabelRetractionRow)
            .join(LabelRow, LabelRow.candidate_id == CandidateRow.id)
            .outerjoin(LabelRetractionRow, LabelRetractionRow.label_id == LabelRow.id)
            .order_by(LabelRow.id)
        )
        for qid, doc_id, label, retraction in labels:
            fields = {"annotator": label.annotator, "value": label.value, "note": label.note, "created_at": label.created_at}
            undo = None if retraction is None else {"annotator": retraction.annotator, "created_at": retraction.created_at}
            carried.labels.append(((qid, doc_id), fields, undo))
        adjudications = session.execute(
            keyed.add_columns(AdjudicationRow)
            .join(AdjudicationRow, AdjudicationRow.candidate_id == CandidateRow.id)
            .order_by(AdjudicationRow.id)
        )
        for qid, doc_id, row in adjudications:
            fields = {"value": row.value, "adjudicator": row.adjudicator, "note": row.note, "created_at": row.created_at}
            carried.adjudications.append(((qid, doc_id), fields))
        return carried

    def write(self, session: Session, new_ids: Mapping[tuple[str, str], int]) -> None:
        labels = [(new_ids[key], fields, undo) for key, fields, undo in self.labels if key in new_ids]
        if labels:
            label_ids = session.scalars(
                insert(LabelRow).returning(LabelRow.id, sort_by_parameter_order=True),
                [{**fields, "candidate_id": candidate_id} for candidate_id, fields, _ in labels],
            ).all()
            retractions = [{**undo, "label_id": label_id} for label_id, (_, _, undo) in zip(label_ids, labels) if undo]
            if retractions:
                session.execute(insert(LabelRetractionRow), retractions)
        adjudications = [{**fields, "candidate_id": new_ids[key]} for key, fields in self.adjudications if key in new_ids]
        if adjudications:
            session.execute(insert(AdjudicationRow), adjudications)

"""The store API: datasets, labels (append-only), model registry and evaluation runs, plus the
labelling queue and review (``db/labeling.py``) and training jobs (``db/jobs.py``).

Every public method runs in its own session and transaction (``session_scope``), so one ``Store``
can be shared by Streamlit threads and background jobs. Bad input raises ``InputError`` and leaves
the database unchanged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.annotation import AnnotationStore
from db.audit import authorize, record
from db.base import (
    ANY_DATASET,
    MAX_LABEL,
    MIN_LABEL,
    CandidateRecord,
    LabelRecord,
    candidates_of,
    check_annotator,
    check_grade,
    check_name,
    check_text,
    current_label_ids,
    dataset_row,
    insert_model_version,
    insert_promotion,
    jsonable,
    model_dict,
    now,
    promoted_scopes,
    promotion_scope,
    promotions,
    serves,
)
from db.calibration import CalibrationStore
from db.jobs import JobStore
from db.labeling import LabelingStore
from db.models import (
    CandidateRow,
    DatasetRow,
    LabelRetractionRow,
    LabelRow,
    ModelVersionRow,
    QuestionRow,
    RunRow,
    RunScoreRow,
)
from db.preferences import PreferenceStore
from db.reimport import TEXT_KEY, ImportReport, write_dataset
from db.systems import SystemStore
from db.users import UserStore
from qa_core import ordering
from qa_core.access import Actor, Permission, acting_name
from qa_core.config import check_dataset_name
from qa_core.data.exporters import write_jsonl, write_qrels
from qa_core.text.normalise import visible_text
from qa_core.types import Candidate, Dataset, InputError, Question

__all__ = ["MAX_LABEL", "MIN_LABEL", "CandidateRecord", "ImportReport", "LabelRecord", "QrelsImport", "Store"]

QRELS_SOURCES = ("labels", "gold")
# Concurrent registrations of one model name can pick the same next version; the unique
# constraint rejects all but one and the others retry.
REGISTER_ATTEMPTS = 5
# Two first imports of one new name race on its unique constraint; the loser tries again (and
# then finds the dataset: "already exists", or a re-import with replace).
IMPORT_ATTEMPTS = 3
# Rows per fetch when a whole collection is read as a stream (``candidate_texts``).
STREAM_ROWS = 10_000
LABEL_HISTORY_KEYS = (
    "qid", "doc_id", "question", "candidate", "annotator", "value", "note", "created_at", "retracted_at", "retired_at"
)


class QrelsImport(NamedTuple):
    """What ``Store.import_qrels`` did: judgements added, and those already current (skipped)."""

    added: int
    unchanged: int


class Store(LabelingStore, JobStore, UserStore, AnnotationStore, PreferenceStore, CalibrationStore, SystemStore):
    """Persistent store over SQLite or PostgreSQL; the schema is migrated on construction.

    Every write that people's roles govern (labels, adjudications, imports, training jobs,
    registrations, promotions, roll backs, roles) takes an ``actor`` (``qa_core.access``): it is
    authorized inside the write's transaction and recorded (audit trail, a label's user). Without
    one, local mode acts as the local user and team mode refuses (``db/audit.py``).
    """

    # ------------------------------------------------------------------ datasets

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
        for attempt in range(1, IMPORT_ATTEMPTS + 1):
            try:
                with self.session_scope() as session:
                    who = authorize(session, actor, Permission.IMPORT, team=self.team)
                    report = self._import_dataset(session, ds, replace)
                    record(session, who, "import", ds.name, {"replace": replace, "source": ds.source, **report.summary()})
                    return report
            except IntegrityError as error:  # a concurrent first import of the same name won the race
                if attempt == IMPORT_ATTEMPTS:
                    raise InputError(f"dataset {ds.name!r} could not be stored: {error.orig}") from error
        raise AssertionError("unreachable")

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
            dataset_id = session.scalar(
                insert(DatasetRow).values(name=ds.name, source=ds.source, created_at=at).returning(DatasetRow.id)
            )
        elif not replace:
            raise InputError(f"dataset {ds.name!r} already exists (use replace to import it again)")
        else:
            session.execute(delete(RunRow).where(RunRow.dataset_id == dataset_id))
        return write_dataset(session, ds, dataset_id, at)

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

    def candidate_texts(self, name: str) -> Iterator[tuple[str, str, str]]:
        """``(qid, doc_id, text)`` of the dataset's current candidates in ``load_dataset``'s order
        (texts as shown and tokenised, as there), streamed from one column projection: what a
        collection's index needs, without building the dataset's question and candidate objects."""
        with self.session_scope() as session:
            query = candidates_of(session, name, QuestionRow.qid, CandidateRow.doc_id, CandidateRow.text).order_by(
                QuestionRow.position, QuestionRow.id, CandidateRow.position, CandidateRow.id
            )
            for qid, doc_id, text in session.execute(query.execution_options(yield_per=STREAM_ROWS)):
                yield qid, doc_id, visible_text(text)

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
        self, dataset: str, run: Mapping[str, Sequence[tuple[str, int, float]]], *, actor: Actor | None = None
    ) -> int:
        """Store a first-stage TREC run's (doc_id, rank, score) on existing candidates.

        Every (qid, doc_id) must exist, else nothing is written. Returns the candidates updated.
        """
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.IMPORT, team=self.team)
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
            record(session, who, "import_run", dataset, {"candidates": len(updates)})
            return len(updates)

    # ------------------------------------------------------------------ labels

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
                return session.scalar(
                    insert(LabelRow)
                    .values(candidate_id=candidate_id, annotator=annotator, value=value, note=note, user_id=who.user_id)
                    .returning(LabelRow.id)
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
            ids = _candidate_ids(session, dataset_row(session, dataset).id)
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

    # ------------------------------------------------------------------ model registry

    def register_model(
        self,
        name: str,
        kind: str,
        checkpoint_path: str | Path,
        training_data: dict[str, Any],
        metrics: dict[str, Any],
        promote: bool = False,
        scope: str | None = None,
        *,
        actor: Actor | None = None,
    ) -> int:
        """Record the next version of model ``name`` and return its ``model_versions`` id; with
        ``promote``, make it the version used for ``scope`` (default: the dataset it was trained on,
        ``training_data["dataset"]``, else every dataset, ``*``). Training needs the right to train,
        promoting also the right to promote."""
        promote_for = (scope or promotion_scope(training_data)) if promote else None
        attempt = 0
        while True:
            attempt += 1
            try:
                with self.session_scope() as session:
                    who = authorize(session, actor, Permission.TRAIN, team=self.team)
                    if promote_for is not None:
                        authorize(session, who, Permission.PROMOTE, team=self.team)
                    version_id = insert_model_version(
                        session, name, kind, checkpoint_path, training_data, metrics, promote_for
                    )
                    record(session, who, "register", name, {"version_id": version_id, "promoted_for": promote_for,
                                                            "dataset": training_data.get("dataset")})
                    return version_id
            except IntegrityError:
                if attempt >= REGISTER_ATTEMPTS:
                    raise

    def model_versions(self, name: str | None = None) -> list[dict[str, Any]]:
        """Registered versions, by name then version, each with the scopes it is promoted for."""
        with self.session_scope() as session:
            query = select(ModelVersionRow).order_by(ModelVersionRow.name, ModelVersionRow.version)
            if name is not None:
                query = query.where(ModelVersionRow.name == name)
            scopes = promoted_scopes(session, name)
            return [model_dict(row, scopes.get(row.id)) for row in session.scalars(query)]

    def promoted_model(self, name: str, scope: str = ANY_DATASET) -> dict[str, Any] | None:
        """The version of ``name`` that ``scope`` (a dataset, or ``*``) uses: its latest promotion
        there, else its latest promotion for every dataset (``*``), else the newest version trained
        on that dataset or on none in particular, else ``None``. ``"promoted"`` in the result says
        whether a promotion chose it."""
        with self.session_scope() as session:
            history = promotions(session, name, scope) or promotions(session, name, ANY_DATASET)
            if history:
                row = session.get(ModelVersionRow, history[0].version_id)
                promoted = True
            else:
                newest = session.scalars(
                    select(ModelVersionRow).where(ModelVersionRow.name == name).order_by(ModelVersionRow.version.desc())
                )
                row = next((r for r in newest if serves(r.training_data, scope)), None)
                promoted = False
            if row is None:
                return None
            return {**model_dict(row, promoted_scopes(session, name).get(row.id)), "promoted": promoted}

    def promotion_history(self, name: str, scope: str) -> list[dict[str, Any]]:
        """The versions promoted for ``scope`` (then for every dataset, ``*``), newest promotion
        first, each version once: where a fallback goes after the version in use."""
        with self.session_scope() as session:
            scopes = promoted_scopes(session, name)
            seen: dict[int, dict[str, Any]] = {}
            history = promotions(session, name, scope)
            if scope != ANY_DATASET:
                history += promotions(session, name, ANY_DATASET)
            for promotion in history:
                if promotion.version_id not in seen:
                    row = session.get(ModelVersionRow, promotion.version_id)
                    seen[promotion.version_id] = {
                        **model_dict(row, scopes.get(row.id)), "action": promotion.action,
                        "promoted_at": promotion.promoted_at,
                    }
            return list(seen.values())

    def model_version(self, version_id: int) -> dict[str, Any]:
        """One registered version by its ``model_versions`` id."""
        with self.session_scope() as session:
            row = session.get(ModelVersionRow, version_id)
            if row is None:
                raise InputError(f"no model version with id {version_id}")
            return model_dict(row, promoted_scopes(session, row.name).get(row.id))

    def promote(self, name: str, version: int, scope: str, *, actor: Actor | None = None) -> None:
        """Make ``version`` of ``name`` the one ``scope`` uses (a dataset, possibly another than the
        one it was trained on, or ``*``)."""
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.PROMOTE, team=self.team)
            row = session.scalars(
                select(ModelVersionRow).where(ModelVersionRow.name == name, ModelVersionRow.version == version)
            ).first()
            if row is None:
                raise InputError(f"model {name!r} has no version {version}")
            insert_promotion(session, name, scope, row.id, "promote")
            record(session, who, "promote", name, {"version": version, "scope": scope})

    def rollback_target(self, name: str, scope: str) -> dict[str, Any] | None:
        """The version of ``name`` that ``rollback`` would put back for ``scope``, or None when no
        other version was promoted there before (the Train page labels and enables its button so)."""
        with self.session_scope() as session:
            row = self._rollback_row(session, name, scope)
            return None if row is None else model_dict(row, promoted_scopes(session, name).get(row.id))

    def rollback(self, name: str, scope: str, *, actor: Actor | None = None) -> dict[str, Any]:
        """Promote again, for ``scope`` only, the version of ``name`` promoted there before the
        current one, and return it; ``InputError`` when there is none."""
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.ROLLBACK, team=self.team)
            row = self._rollback_row(session, name, scope)
            if row is None:
                raise InputError(f"model {name!r} has no earlier version promoted for {scope!r} to roll back to")
            insert_promotion(session, name, scope, row.id, "rollback")
            record(session, who, "rollback", name, {"version": row.version, "scope": scope})
            return model_dict(row, promoted_scopes(session, name).get(row.id))

    @staticmethod
    def _rollback_row(session: Session, name: str, scope: str) -> ModelVersionRow | None:
        """The version promoted before the current one, a roll back undoing the promotion it rolled
        back (a stack): after 1, 4 and a roll back to 1, nothing is left to roll back to (not 4)."""
        stack: list[int] = []
        for promotion in reversed(promotions(session, name, scope)):  # oldest first
            if promotion.action == "rollback" and stack:
                stack.pop()
            if not stack or stack[-1] != promotion.version_id:
                stack.append(promotion.version_id)
        earlier = next((v for v in reversed(stack[:-1]) if v != stack[-1]), None)
        return None if earlier is None else session.get(ModelVersionRow, earlier)

    # ------------------------------------------------------------------ runs

    def save_run(
        self,
        dataset: str,
        split: str | None,
        scores: Mapping[str, Mapping[str, float]],
        metrics: dict[str, Any],
        model_version_id: int | None = None,
        tag: str = "",
        *,
        actor: Actor | None = None,
    ) -> int:
        """Store a scored run (ranks: score descending, ties by doc_id) and return its id; the
        ``actor`` needs the right to train (a run is a model's evaluation)."""
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.TRAIN, team=self.team)
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
                for rank, (doc_id, score) in enumerate(ordering.ranked(doc_scores), start=1):
                    if (qid, doc_id) not in ids:
                        raise InputError(f"dataset {dataset!r} has no candidate {doc_id!r} for question {qid!r}")
                    rows.append(
                        {"run_id": run_id, "candidate_id": ids[(qid, doc_id)], "score": float(score), "rank": rank}
                    )
            if rows:
                session.execute(insert(RunScoreRow), rows)
            record(session, who, "save_run", dataset, {"run_id": run_id, "split": split, "tag": tag,
                                                       "model_version_id": model_version_id})
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
                .order_by(QuestionRow.position, QuestionRow.id, RunScoreRow.rank)
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
    """Reject what the database would reject (unique ids, names and ids too long for its indexes,
    NUL characters, which PostgreSQL cannot store) and what no importer lets through (ranks below
    1, one text with two gold labels in a question), with a message naming the culprit."""
    name = check_dataset_name(check_name(ds.name, "dataset name"))
    _check_texts(f"dataset {name!r}", source=ds.source)
    seen_qids: set[str] = set()
    for number, question in enumerate(ds.questions, start=1):
        check_name(question.qid, f"dataset {name!r}: the id of question {number}")
        where = f"dataset {name!r}, question {question.qid!r}"
        check_name(question.split, f"{where}: the split")
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


def _candidate_ids(session: Session, dataset_id: int) -> dict[tuple[str, str], int]:
    """(qid, doc_id) -> id of the dataset's current candidates."""
    rows = session.execute(
        select(QuestionRow.qid, CandidateRow.doc_id, CandidateRow.id)
        .join(QuestionRow, CandidateRow.question_id == QuestionRow.id)
        .where(QuestionRow.dataset_id == dataset_id, CandidateRow.retired_at.is_(None))
    )
    return {(qid, doc_id): candidate_id for qid, doc_id, candidate_id in rows}

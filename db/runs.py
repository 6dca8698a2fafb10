"""Persistence of evaluation runs: a model's (or a fusion's) scores over a dataset split, with its
metrics, read back for comparison."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import insert, select

from db.audit import authorize, record
from db.base import StoreBase, candidate_ids, dataset_row, insert_id, jsonable
from db.models import CandidateRow, DatasetRow, ModelVersionRow, QuestionRow, RunRow, RunScoreRow
from qa_core import ordering
from qa_core.access import Actor, Permission
from qa_core.types import InputError


class RunStore(StoreBase):
    """Saved runs and their per-candidate scores and ranks."""


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
            ids = candidate_ids(session, dataset_id)
            run_id = insert_id(
                session, RunRow, dataset_id=dataset_id, split=split, tag=tag, metrics=jsonable(metrics),
                model_version_id=model_version_id,
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

"""Pairwise and top-k judgements in the store (issue 21, item 2): "which of these two answers is
better?" and "pick the best k of this pool", append-only with retractions for undo, like labels.

A judgement names the candidates shown (all of one question) and what was chosen; the rule that
turns them into graded labels is ``qa_core.services.labeling.preferences``. Writes are guarded like
labels: the actor needs the right to label and, when signed in, judges under their own name.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import exists, insert, select
from sqlalchemy.orm import Session

from db.annotation import guideline_in_force
from db.audit import authorize
from db.base import StoreBase, check_annotator, dataset_row, insert_id
from db.labeling import end_open_claims
from db.models import CandidateRow, PreferenceJudgementRow, PreferenceRetractionRow, QuestionRow, QueueClaimRow
from qa_core.access import Actor, Permission, acting_name
from qa_core.types import InputError

PAIRWISE, TOPK = "pairwise", "topk"
PAIR_OUTCOMES = ("left", "right", "tie", "both_bad")
PICKED = "picked"  # a top-k judgement's outcome (``picked`` holds the choice, possibly empty)


class PreferenceJudgement(NamedTuple):
    """A current (unretracted) preference judgement; ``shown`` and ``picked`` are candidate ids."""

    judgement_id: int
    qid: str
    mode: str
    shown: tuple[int, ...]
    outcome: str
    picked: tuple[int, ...]
    annotator: str
    created_at: datetime


class PreferenceStore(StoreBase):
    """Preference judgements (mixed into ``db.store.Store``)."""

    def judge_pair(
        self, left: int, right: int, outcome: str, annotator: str | None, holder: str | None = None, *,
        actor: Actor | None = None,
    ) -> int:
        """Record which of two candidates of one question is better (``left``, ``right``, ``tie``:
        equally good, ``both_bad``) and return the judgement's id."""
        if outcome not in PAIR_OUTCOMES:
            raise InputError(f"a pairwise outcome is one of {', '.join(PAIR_OUTCOMES)}, got {outcome!r}")
        if left == right:
            raise InputError("a pairwise judgement compares two different candidates")
        return self._judge(PAIRWISE, [left, right], outcome, [], annotator, holder, actor)

    def judge_pool(
        self, shown: Sequence[int], picked: Sequence[int], annotator: str | None, holder: str | None = None, *,
        actor: Actor | None = None,
    ) -> int:
        """Record the best candidates of a pool, best first (none: nothing in it fits), and return
        the judgement's id."""
        shown, picked = list(shown), list(picked)
        if len(set(shown)) != len(shown) or len(shown) < 2:
            raise InputError("a top-k pool shows two or more different candidates")
        if len(set(picked)) != len(picked) or not set(picked) <= set(shown):
            raise InputError("the picks must be different candidates of the pool shown")
        return self._judge(TOPK, shown, PICKED, picked, annotator, holder, actor)

    def _judge(
        self, mode: str, shown: list[int], outcome: str, picked: list[int], annotator: str | None,
        holder: str | None, actor: Actor | None,
    ) -> int:
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.LABEL, team=self.team)
            annotator = check_annotator(acting_name(who, annotator))
            question_id = _one_question(session, shown)
            if holder is not None:  # the item's leases (``LabelingStore.claim_group``) end with its judgement
                end_open_claims(session, "labelled", QueueClaimRow.holder == holder, QueueClaimRow.candidate_id.in_(shown))
            return insert_id(
                session, PreferenceJudgementRow, question_id=question_id, mode=mode, shown=shown, outcome=outcome,
                picked=picked, annotator=annotator, user_id=who.user_id, holder=holder,
                guideline_id=guideline_in_force(session, shown[0]),
            )

    def undo_preference(
        self, annotator: str | None, dataset: str, mode: str, holder: str | None = None, *, actor: Actor | None = None
    ) -> dict[str, Any] | None:
        """Retract the annotator's latest current ``mode`` judgement in ``dataset`` (made in the app
        session ``holder`` if given) and return it (``judgement_id``, ``shown``); ``None``: nothing
        to undo. The judgement stays in the history, marked retracted."""
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.LABEL, team=self.team)
            annotator = check_annotator(acting_name(who, annotator))
            query = _current(session, dataset).where(
                PreferenceJudgementRow.annotator == annotator, PreferenceJudgementRow.mode == mode
            )
            if holder is not None:
                query = query.where(PreferenceJudgementRow.holder == holder)
            row = session.scalars(query.order_by(PreferenceJudgementRow.id.desc()).limit(1)).first()
            if row is None:
                return None
            session.execute(insert(PreferenceRetractionRow).values(judgement_id=row.id))
            return {"judgement_id": row.id, "shown": tuple(row.shown)}

    def preference_judgements(
        self, dataset: str, annotator: str | None = None, mode: str | None = None
    ) -> list[PreferenceJudgement]:
        """The dataset's current (unretracted) preference judgements, oldest first."""
        with self.session_scope() as session:
            query = _current(session, dataset)
            if annotator is not None:
                query = query.where(PreferenceJudgementRow.annotator == annotator)
            if mode is not None:
                query = query.where(PreferenceJudgementRow.mode == mode)
            rows = session.execute(
                select(PreferenceJudgementRow, QuestionRow.qid)
                .join(QuestionRow, PreferenceJudgementRow.question_id == QuestionRow.id)
                .where(PreferenceJudgementRow.id.in_(query.with_only_columns(PreferenceJudgementRow.id)))
                .order_by(PreferenceJudgementRow.id)
            )
            return [
                PreferenceJudgement(row.id, qid, row.mode, tuple(row.shown), row.outcome, tuple(row.picked),
                                    row.annotator, row.created_at)
                for row, qid in rows
            ]


def _current(session: Session, dataset: str):
    """``select(PreferenceJudgementRow)`` of the dataset's unretracted judgements."""
    return (
        select(PreferenceJudgementRow)
        .join(QuestionRow, PreferenceJudgementRow.question_id == QuestionRow.id)
        .where(
            QuestionRow.dataset_id == dataset_row(session, dataset).id,
            ~exists().where(PreferenceRetractionRow.judgement_id == PreferenceJudgementRow.id),
        )
    )


def _one_question(session: Session, candidate_ids: list[int]) -> int:
    """The question every one of ``candidate_ids`` belongs to; ``InputError`` otherwise."""
    found = session.execute(select(CandidateRow.id, CandidateRow.question_id).where(CandidateRow.id.in_(candidate_ids)))
    rows = {candidate_id: question_id for candidate_id, question_id in found}
    missing = [c for c in candidate_ids if c not in rows]
    if missing:
        raise InputError(f"no candidate with id {missing[0]}")
    if len(set(rows.values())) != 1:
        raise InputError("a preference judgement compares candidates of one question")
    return next(iter(rows.values()))

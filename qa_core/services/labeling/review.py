"""A reviewer settling a conflict: who may settle it (a reviewer who did not label the pair), the
note kept with the final grade, and the model's disagreements joining the conflicts.

The store checks the reviewer's role and party again inside the write's transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qa_core.access import Actor
from qa_core.services.labeling.agreement import Conflict
from qa_core.types import InputError

if TYPE_CHECKING:
    from db.store import Store


def is_party(conflict: Conflict, reviewer: str | None) -> bool:
    """Whether ``reviewer`` labelled the pair: a party to the conflict, who may not settle it."""
    return reviewer is not None and reviewer in conflict.labels


def settle(store: Store, conflict: Conflict, grade: int, reviewer: str | None, note: str | None, actor: Actor) -> int:
    """Record the reviewer's final grade of ``conflict`` (with ``note`` when it has text) and return
    the adjudication's id; the latest adjudication wins over every annotator's label."""
    if reviewer is None:
        raise InputError("choose or type your name to settle conflicts as a reviewer")
    if is_party(conflict, reviewer):
        raise InputError(f"{reviewer} labelled {conflict.qid} / {conflict.doc_id}: another reviewer settles it")
    return store.labels.adjudicate(conflict.candidate_id, grade, reviewer, (note or "").strip() or None, actor=actor)


def with_model_disagreements(conflicts: list[Conflict], disagreements: list[Conflict]) -> list[Conflict]:
    """The annotators' conflicts, then a model's disagreements with their consensus on other pairs."""
    known = {conflict.candidate_id for conflict in conflicts}
    return conflicts + [d for d in disagreements if d.candidate_id not in known]

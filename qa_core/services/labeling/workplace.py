"""An annotator's place on the Label and Ask pages: who has labelled a dataset, the splits a queue
draws from (TRAIN first: labels there train models and never move a TEST metric, issue 22), the
pair a session hands back when it switches dataset or annotator, and a pair judged in place.

The store checks the actor inside each write's transaction (a signed-in user labels and undoes
only as themselves).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from db.base import MAX_LABEL, MIN_LABEL
from qa_core.access import AccessDenied, Actor, Permission
from qa_core.types import InputError

if TYPE_CHECKING:
    from db.store import Store

LABEL_SPLIT = "train"  # the queue's default split (issue 22: never TEST unless chosen)
GRADES = range(MIN_LABEL, MAX_LABEL + 1)  # the grades the store accepts: one button each


def annotators(store: Store, dataset: str) -> list[str]:
    """Everyone with a current label in ``dataset``, sorted."""
    return sorted({name for judged in store.labels.current_labels(dataset).values() for name in judged})


def queue_splits(store: Store, dataset: str) -> tuple[list[str], int]:
    """The dataset's splits and the position of the one a queue starts on (TRAIN where there is one)."""
    splits = list(store.datasets.dataset_summary(dataset)["questions"])
    return splits, splits.index(LABEL_SPLIT) if LABEL_SPLIT in splits else 0


def switch_queue(
    store: Store, holder: str, previous: tuple[str, str | None] | None, current: tuple[str, str | None], actor: Actor
) -> None:
    """A session (``holder``) moving from ``previous`` (dataset, annotator) to ``current`` hands back
    the pair it left on screen, so that another session gets it at once instead of after its lease."""
    if previous is not None and previous != current:
        store.queue.release_claims(previous[0], holder, actor=actor)


def _check_judge(qid: str | None, annotator: str | None, actor: Actor) -> tuple[str, str]:
    if qid is None:
        raise InputError("a typed question's candidates belong to other questions: judge a dataset question's")
    if not actor.may(Permission.LABEL):
        raise AccessDenied(f"{actor.describe()} may not label pairs")
    if annotator is None:
        raise InputError("type your name (as on the Label page) to judge here")
    return qid, annotator


def judge_in_place(
    store: Store, dataset: str, qid: str | None, doc_id: str, grade: int, annotator: str | None, actor: Actor
) -> int:
    """``annotator``'s grade of a dataset question's candidate shown outside the queue (the Ask
    page); returns the label's id. Earlier labels stay as history."""
    qid, annotator = _check_judge(qid, annotator, actor)
    return store.labels.add_label(store.datasets.find_candidate_id(dataset, qid, doc_id), annotator, grade, actor=actor)


def undo_in_place(store: Store, dataset: str, annotator: str | None, actor: Actor) -> dict[str, Any] | None:
    """Take back ``annotator``'s latest label in ``dataset`` (kept in the history, marked retracted);
    ``None`` when there is none."""
    if annotator is None:
        raise InputError("type your name (as on the Label page) to undo your label")
    return store.labels.undo_last(annotator, dataset, actor=actor)

"""Keeping a typed question (issue 37): the question asked on Ask and the BM25 pool it was shown,
with each candidate's first-stage rank and score, become a question of the dataset, so that it is
ranked, compared, judged and trained on like any other.

The kept candidates keep the collection ids they were shown under (``qid/doc_id`` of the question
the sentence came from), carry no gold label (the source question's gold label judged another
question), and land in the split the user picks: ``explore`` by default, a split that no
evaluation reads unless asked; TEST only when chosen by name. The store writes it
(``db/keep.py``): the import's id rules, the right to import and the audit trail, in one
transaction; a text the dataset holds already is not kept twice.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from db.base import check_text
from db.keep import KeptQuestion, kept_qid
from qa_core.names import check_name
from qa_core.services import candidate_pools
from qa_core.types import InputError, Question

if TYPE_CHECKING:
    from db.store import Store
    from qa_core.access import Actor
    from qa_core.services.ranking import Ranking

EXPLORE_SPLIT = "explore"
STANDARD_SPLITS = ("train", "dev", "test")


def keep_splits(store: Store, dataset: str) -> list[str]:
    """The splits a question may be kept in, ``explore`` first (the default), then the dataset's
    own and the standard ones."""
    present = list(store.datasets.dataset_summary(dataset)["questions"])
    return list(dict.fromkeys([EXPLORE_SPLIT, *present, *STANDARD_SPLITS]))


def keep_question(
    store: Store, dataset: str, ranking: Ranking, split: str = EXPLORE_SPLIT, *, actor: Actor | None = None
) -> KeptQuestion:
    """Add the typed question of ``ranking`` and its pool, in first-stage order, to ``dataset``."""
    if ranking.qid is not None:
        raise InputError(f"question {ranking.qid} is a question of the dataset already")
    # The import's rules before the store is asked: the one name rule for the split (no ``../x``), the
    # question's length limit, and no NUL (PostgreSQL stores none; a typed question may hold one).
    split = check_name(split, "split")
    text = candidate_pools.check_question(ranking.question)
    check_text(text, "the question")
    # A whole-collection ranking (Ask's option) holds every sentence of the collection: the kept pool
    # is what the first stage found (BM25's top n, first-stage ranks kept), as for a BM25 ranking.
    found = [c for c in ranking.pool if c.first_stage_rank is not None] or list(ranking.pool)
    pool = sorted(found, key=lambda c: (c.first_stage_rank is None, c.first_stage_rank or 0))
    candidates = [dataclasses.replace(candidate, label=None) for candidate in pool]
    return store.keep.keep_question(dataset, Question(kept_qid(text), text, candidates, split), actor=actor)


def as_kept(ranking: Ranking, kept: KeptQuestion) -> Ranking:
    """The same ranking as the kept question's: its candidates are judged on the kept question from now on."""
    return dataclasses.replace(ranking, qid=kept.qid)


def describe(kept: KeptQuestion, dataset: str) -> str:
    """What keeping did, for the page."""
    where = f"question {kept.qid} of {dataset}, split {kept.split}, {kept.candidates} candidates"
    if not kept.added:
        return f"Already kept: the dataset holds this question as {where}. Judge its candidates here or on the Label page."
    return (f"Kept as {where}: judge its candidates here now, or on the Label page and Compare; rank it with "
            "any model under Pick a dataset question.")

"""Reranking a typed question's whole collection with the model instead of BM25's top n.

BM25 decides what a reranker can show: a right answer outside its top n is never seen. For a
collection small enough to score whole on this machine, Ask offers every unique sentence of the
dataset as the pool instead; each keeps its first-stage rank (BM25 with RM3 expansion; ``None``
where that finds nothing for it), so the table shows what the first stage would have missed.

``WHOLE_COLLECTION_LIMIT`` comes from ``benchmarks/whole_collection.py``: SM-CNN over WikiQA's 11,406
sentences (docs/benchmarks.md, "Reranking the whole collection"); the wait grows linearly with the
collection and with the model's cost per pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from qa_core.retrieval import FIRST_STAGE_FEEDBACK
from qa_core.services import candidate_pools
from qa_core.types import Candidate, InputError

if TYPE_CHECKING:
    from db.store import Store

# Unique sentences up to which Ask offers the whole collection: WikiQA's (11,406) fits. SM-CNN scored
# it at 462 pairs/s on this machine's 2 shared cores under load (25 s a question; about 1 s at the
# 11,521 pairs/s of an idle machine), docs/benchmarks.md "Reranking the whole collection": 12,000 keeps
# the wait measured here under 30 s, paid again on every question.
WHOLE_COLLECTION_LIMIT = 12_000
SMCNN_PAIRS_PER_S = 462


def offered_size(collection_size: int | None) -> int | None:
    """The number of unique sentences the model would score for a typed question when the option
    is offered (the collection's size known, ``index_builds.ready_size``, and within the limit)."""
    return collection_size if collection_size is not None and collection_size <= WHOLE_COLLECTION_LIMIT else None


def wait_estimate(size: int) -> float:
    """Seconds SM-CNN takes to score ``size`` sentences on this machine (its measured rate)."""
    return size / SMCNN_PAIRS_PER_S


def candidates(store: Store, dataset: str, question: str) -> list[Candidate]:
    """Every unique sentence of the dataset's collection, in the collection's order, with its BM25
    rank and score for ``question`` where it has one; ``InputError`` above the limit."""
    question = candidate_pools.check_question(question)
    index = candidate_pools.collection_index(store, dataset)
    if len(index) > WHOLE_COLLECTION_LIMIT:
        raise InputError(
            f"dataset {dataset!r} has {len(index):,} unique sentences, more than the {WHOLE_COLLECTION_LIMIT:,} "
            "this machine reranks whole for a question; rerank BM25's top candidates instead"
        )
    bm25 = {name: (rank, score) for rank, (name, score) in enumerate(index.search(question, len(index), FIRST_STAGE_FEEDBACK), start=1)}
    return [
        Candidate(name, text, first_stage_rank=bm25.get(name, (None, None))[0],
                  first_stage_score=bm25.get(name, (None, None))[1])
        for name, text in candidate_pools.unique_sentences(store.datasets.candidate_texts(dataset))
    ]


def origin(store: Store, dataset: str, qid: str | None, pool: Sequence[Candidate]) -> str:
    """How a ranked pool was found, for Ask's caption: ``candidate_pools.candidates_origin``, or, for a
    typed question's whole collection, how many sentences were considered and how many BM25 found."""
    if qid is None and len(pool) == len(candidate_pools.collection_index(store, dataset)):
        matched = sum(candidate.first_stage_rank is not None for candidate in pool)
        return (f"the whole collection: all {len(pool):,} unique sentences of the dataset scored by the model "
                f"(the first stage, BM25 with RM3 expansion, ranks {matched:,} of them: the first-stage rank)")
    return candidate_pools.candidates_origin(store, dataset, qid)

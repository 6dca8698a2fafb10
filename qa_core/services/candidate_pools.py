"""Questions and their candidates: the checks a typed question or edited candidate passes, the BM25
collection of a dataset's unique candidate sentences and a typed question's candidates from it, the
dataset questions' own pools, and the stored labels keyed as the collection names its sentences.

The request path's input side (``ranking.py`` scores what these return); no Streamlit here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from qa_core import config
from qa_core.text.normalise import visible_text
from qa_core.types import MAX_CANDIDATE_CHARS, MAX_QUESTION_CHARS, Candidate, Dataset, InputError

if TYPE_CHECKING:  # imported where used: the CLI starts without loading the store or bm25s
    from db.store import Store
    from qa_core.retrieval import BM25Index


DEFAULT_CANDIDATES = 50


def _checked_text(text: str | None, what: str, limit: int, hint: str) -> str:
    """``text`` stripped of surrounding whitespace; ``InputError`` naming ``what`` if it is empty
    (with ``hint`` on what to do) or longer than ``limit`` characters."""
    value = visible_text(text or "").strip()
    if not value:
        raise InputError(f"{what} is empty: {hint}")
    if len(value) > limit:
        raise InputError(f"{what} is too long ({len(value):,} characters); the limit is {limit:,}")
    return value


def check_question(text: str | None) -> str:
    """The question stripped of surrounding whitespace; ``InputError`` if empty or too long."""
    return _checked_text(text, "the question", MAX_QUESTION_CHARS, "type a question or pick one from the dataset")


def check_candidate(text: str | None) -> str:
    """An edited candidate stripped of surrounding whitespace; ``InputError`` if empty or too long."""
    return _checked_text(text, "the edited candidate", MAX_CANDIDATE_CHARS, "type the answer text to score")


def sentence_key(text: str) -> str:
    """What makes two candidate sentences the same sentence of a collection (case and spacing aside)."""
    return " ".join(text.split()).lower()


def unique_sentences(rows: Iterable[tuple[str, str, str]]) -> Iterator[tuple[str, str]]:
    """``(qid/doc_id, text)`` of each sentence's first occurrence among ``(qid, doc_id, text)`` rows,
    in their order: the collection a typed question searches, named as its sentences are named."""
    seen: set[str] = set()
    for qid, doc_id, text in rows:
        key = sentence_key(text)
        if key and key not in seen:
            seen.add(key)
            yield collection_id(qid, doc_id), text


def collection_id(qid: str, doc_id: str) -> str:
    """A collection sentence's id: doc_ids repeat across questions in many benchmarks; qid/doc_id does not."""
    return f"{qid}/{doc_id}"


def collection_sentences(dataset: Dataset) -> dict[str, Candidate]:
    """The dataset's unique candidate sentences (first occurrence kept), keyed ``qid/doc_id``, from
    a dataset in memory (the Ask page reads them from the store, ``candidates_for_question``)."""
    pairs = [(question.qid, candidate) for question in dataset.questions for candidate in question.candidates]
    originals = {collection_id(qid, candidate.doc_id): candidate for qid, candidate in reversed(pairs)}
    return {
        name: Candidate(name, text, source=originals[name].source, url=originals[name].url)
        for name, text in unique_sentences((qid, candidate.doc_id, candidate.text) for qid, candidate in pairs)
    }


def index_folder(store: Store, dataset: str) -> Path:
    """Where the dataset's BM25 index is saved: the data folder, per store and dataset (replicas
    sharing the data folder share it)."""
    place = hashlib.sha256(f"{store.engine.url}\0{dataset}".encode()).hexdigest()[:24]
    return config.data_dir() / "bm25" / place


_indexes: dict[tuple[str, str, str], BM25Index] = {}


_indexes_lock = threading.Lock()


def dataset_version(store: Store, dataset: str) -> str:
    """Changes when the dataset is re-imported: a cache key for what is built from its text.

    Called on every request (Ask page, ``candidates_for_question``), so it is one indexed lookup."""
    row_id, created_at = store.datasets.dataset_stamp(dataset)
    return f"{row_id}@{created_at}"


def collection_index(store: Store, dataset: str) -> BM25Index:
    """The BM25 index of the dataset's unique candidate sentences, once per store, dataset and import
    (a re-import rebuilds it): loaded from the data folder, or built from one streamed pass over the
    store's candidate texts (the unique-sentence map made in that pass) and saved. The sentences
    themselves stay in the store; a search's hits are read by id."""
    from qa_core.retrieval import saved_index

    version = dataset_version(store, dataset)
    key = (str(store.engine.url), dataset, version)
    with _indexes_lock:
        if key not in _indexes:
            _indexes[key] = saved_index(
                index_folder(store, dataset), version, lambda: list(unique_sentences(store.datasets.candidate_texts(dataset)))
            )
        return _indexes[key]


def _split_ids(name: str) -> list[tuple[str, str]]:
    """Every ``(qid, doc_id)`` a collection id could name: either part may hold '/' itself."""
    return [(name[:at], name[at + 1:]) for at, char in enumerate(name) if char == "/"]


def candidates_for_question(
    store: Store, dataset: str, question_text: str, k: int = DEFAULT_CANDIDATES
) -> list[Candidate]:
    """BM25's top ``k`` of the dataset's unique candidate sentences, with first-stage rank and score.

    ``InputError`` when no sentence shares a word with the question (there is nothing to rerank).
    """
    question = check_question(question_text)
    if k < 1:
        raise InputError(f"the number of candidates must be at least 1, got {k}")
    from qa_core.retrieval import FIRST_STAGE_FEEDBACK

    hits = collection_index(store, dataset).search(question, k, FIRST_STAGE_FEEDBACK)
    if not hits:
        raise InputError(
            f"no sentence of dataset {dataset!r} shares a word with the question (question words such as "
            "'who' or 'is' are not searched); try other words or pick one of the dataset's questions"
        )
    stored = store.datasets.candidates_by_id(dataset, {ids for name, _ in hits for ids in _split_ids(name)})
    found = {collection_id(qid, doc_id): candidate for (qid, doc_id), candidate in stored.items()}
    if any(name not in found for name, _ in hits):
        raise InputError(f"dataset {dataset!r} was imported again while the question was searched; ask it again")
    return [
        dataclasses.replace(found[name], doc_id=name, first_stage_rank=position, first_stage_score=score)
        for position, (name, score) in enumerate(hits, start=1)
    ]


def candidates_origin(store: Store, dataset: str, qid: str | None) -> str:
    """How a ranked pool was found, for a caption: a dataset question's own candidates (``qid``), or
    BM25 over the dataset's whole collection (a typed question)."""
    if qid is not None:
        return f"question {qid}'s own candidates"
    from qa_core.retrieval import FIRST_STAGE_FEEDBACK

    index = collection_index(store, dataset)
    return (f"BM25's best of the dataset's {len(index):,} unique sentences ({index.analysis.describe()}; "
            f"{FIRST_STAGE_FEEDBACK.describe()})")


def stored_labels(store: Store, dataset: str, qid: str | None = None) -> dict[str, int]:
    """The latest stored (annotator) label per candidate, ``{doc_id: grade}``.

    With ``qid``, the labels of that question's pool; without, of every question, keyed
    ``qid/doc_id`` as the BM25 collection names its sentences (``candidates_for_question``).
    """
    qrels = store.labels.qrels(dataset, source="labels")
    if qid is not None:
        return dict(qrels.get(qid, {}))
    return {f"{q}/{doc_id}": grade for q, grades in qrels.items() for doc_id, grade in grades.items()}


def datasets_overview(store: Store) -> pd.DataFrame:
    """One row per dataset: questions per split, candidates, gold positives, labelled candidates."""
    rows = []
    for name in store.datasets.dataset_names():
        summary = store.datasets.dataset_summary(name)
        rows.append(
            {
                "dataset": name,
                "source": summary["source"],
                "questions": sum(summary["questions"].values()),
                "splits": ", ".join(f"{split}: {count}" for split, count in summary["questions"].items()),
                "candidates": summary["candidates"],
                "gold positives": summary["positives"],
                "labelled": summary["labelled"],
            }
        )
    return pd.DataFrame(rows, columns=["dataset", "source", "questions", "splits", "candidates", "gold positives", "labelled"])

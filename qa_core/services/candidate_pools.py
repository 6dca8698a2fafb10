"""Questions and their candidates: the checks a typed question or edited candidate passes, the BM25
collection of a dataset's unique candidate sentences and a typed question's candidates from it, the
dataset questions' own pools, and the stored labels keyed as the collection names its sentences.

The request path's input side (``ranking.py`` scores what these return); no Streamlit here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urldefrag

import pandas as pd

from qa_core import config
from qa_core.data.benchmark_formats import DOCUMENT_POOLS
from qa_core.text.normalise import visible_text
from qa_core.types import MAX_CANDIDATE_CHARS, MAX_QUESTION_CHARS, Candidate, Dataset, InputError

if TYPE_CHECKING:  # imported where used: the CLI starts without loading the store or bm25s
    from db.store import Store
    from qa_core.retrieval import Analysis, BM25Index


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


# A candidate as a collection reads it: (qid, doc_id, text, source, url) (``Store.datasets.candidate_texts``).
CollectionRow = tuple[str, str, str, str, "str | None"]


def _first_occurrences(rows: Iterable[Sequence]) -> Iterator[tuple[int, str, str]]:
    """``(position, qid/doc_id, text)`` of each sentence's first occurrence among ``(qid, doc_id, text, ...)`` rows."""
    seen: set[str] = set()
    for position, (qid, doc_id, text, *_) in enumerate(rows):
        key = sentence_key(text)
        if key and key not in seen:
            seen.add(key)
            yield position, collection_id(qid, doc_id), text


def unique_sentences(rows: Iterable[Sequence]) -> Iterator[tuple[str, str]]:
    """``(qid/doc_id, text)`` of each sentence's first occurrence among ``(qid, doc_id, text, ...)``
    rows, in their order: the collection a typed question searches, named as its sentences are named."""
    for _, name, text in _first_occurrences(rows):
        yield name, text


def document_of(qid: str, source: str, url: str | None) -> str | None:
    """Which document a candidate sentence came from, as far as the data says: its URL (fragment
    aside), else its question's pool where its format's pools are documents (WikiQA), else unknown."""
    if url:
        return "url:" + urldefrag(url).url
    return f"pool:{qid}" if source in DOCUMENT_POOLS else None


def collection_passages(rows: Iterable[CollectionRow], analysis: Analysis) -> list[tuple[str, str]]:
    """``(qid/doc_id, text as indexed)`` of each unique sentence (``unique_sentences``), its text with its
    document's context when ``analysis`` asks for it (``retrieval.in_context``). A sentence in several
    documents is indexed with the context of its first occurrence, as it is named by it; the context
    is read from every row in the store's order (a document's first sentence may be a repeat of
    another document's). A sentence repeated within one document (a URL cited by several pools) is
    a member of it once, so it is never its own neighbour."""
    from qa_core.retrieval import in_context

    passages: list[tuple[str, str | None]] = []  # every row's text and document, read in the same one pass
    members: set[tuple[str, str]] = set()

    def reading() -> Iterator[CollectionRow]:
        for row in rows:
            qid, _, text, source, url = row
            document = document_of(qid, source, url)
            if document is not None:
                member = (document, sentence_key(text))
                document = None if member in members else document
                members.add(member)
            passages.append((text, document))
            yield row

    kept = [(position, name) for position, name, _ in _first_occurrences(reading())]
    indexed = in_context(passages, analysis.context)
    return [(name, indexed[position]) for position, name in kept]


def collection_id(qid: str, doc_id: str) -> str:
    """A collection sentence's id: doc_ids repeat across questions in many benchmarks; qid/doc_id does not."""
    return f"{qid}/{doc_id}"


def dataset_rows(dataset: Dataset) -> list[CollectionRow]:
    """A dataset in memory as the store streams its collection (``Store.datasets.candidate_texts``)."""
    return [(question.qid, c.doc_id, c.text, c.source, c.url) for question in dataset.questions for c in question.candidates]


def collection_sentences(dataset: Dataset) -> dict[str, Candidate]:
    """The dataset's unique candidate sentences (first occurrence kept), keyed ``qid/doc_id``, from
    a dataset in memory (the Ask page reads them from the store, ``candidates_for_question``)."""
    pairs = [(question.qid, candidate) for question in dataset.questions for candidate in question.candidates]
    originals = {collection_id(qid, candidate.doc_id): candidate for qid, candidate in reversed(pairs)}
    return {
        name: Candidate(name, text, source=originals[name].source, url=originals[name].url)
        for name, text in unique_sentences(dataset_rows(dataset))
    }


def index_folder(store: Store, dataset: str) -> Path:
    """Where the dataset's BM25 index is saved: the data folder, per store and dataset (replicas
    sharing the data folder share it)."""
    place = hashlib.sha256(f"{store.engine.url}\0{dataset}".encode()).hexdigest()[:24]
    return config.data_dir() / "bm25" / place


_indexes: OrderedDict[tuple[str, str, str, str], BM25Index] = OrderedDict()  # least recently used first


_indexes_lock = threading.Lock()


def dataset_version(store: Store, dataset: str) -> str:
    """Changes when the dataset is re-imported, a question added by keeping it or a first-stage run imported: a
    cache key for what is built from its questions and candidates.

    Called on every request (Ask page, ``candidates_for_question``), so it is one indexed lookup."""
    row_id, created_at = store.datasets.dataset_stamp(dataset)
    return f"{row_id}@{created_at}"


def collection_index(store: Store, dataset: str) -> BM25Index:
    """The BM25 index of the dataset's unique candidate sentences, once per store, dataset, import and
    first-stage analysis (a re-import or another analysis rebuilds it): loaded from the data folder, or built from one streamed pass over the
    store's candidate texts (the unique-sentence map made in that pass) and saved. The sentences
    themselves stay in the store; a search's hits are read by id. The process keeps
    ``config.max_indexes()`` of them, the least recently used dropped first (loaded again, memory-mapped, when asked)."""
    from qa_core.retrieval import FIRST_STAGE, saved_index

    version = dataset_version(store, dataset)
    key = (str(store.engine.url), dataset, version, FIRST_STAGE.key())
    with _indexes_lock:
        if key not in _indexes:
            _indexes[key] = saved_index(
                index_folder(store, dataset), version,
                lambda: collection_passages(store.datasets.candidate_texts(dataset), FIRST_STAGE), FIRST_STAGE,
            )
            while len(_indexes) > config.max_indexes():  # a setting: the least recently used is dropped
                _indexes.popitem(last=False)
        _indexes.move_to_end(key)
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

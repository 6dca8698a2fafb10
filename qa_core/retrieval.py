"""BM25 over candidate sentences with bm25s (first-stage retrieval and the BM25 baseline ranker).

Tokenisation is ``bm25s.tokenize``: lowercase, words of two or more word characters, a stop list,
optionally PyStemmer's Snowball stemmer (bm25s' recommended one); a passage may be indexed with
context from its document (``in_context``). What is used is an ``Analysis``: the first stage over a
whole collection (``BM25Index``) uses ``FIRST_STAGE``, chosen on DEV by recall@50 of right answers
(``benchmarks/first_stage.py``, ``first_stage_context.py``); the BM25 baseline ranker's
pool scores (``bm25_scores``) keep ``PLAIN``, bm25s' defaults, so its reported results stand.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import hashlib
import json
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from qa_core import ordering

_DOC_IDS_FILE = "doc_ids.json"
_ANALYSIS_FILE = "analysis.json"
_MANIFEST_FILE = "manifest.json"  # written last: a saved index without it is incomplete
_LOCK_FILE = ".build.lock"  # a dot: never taken for an index, never deleted as a stale one
# 2: a sentence repeated within its document is a member of it once (in_context's input);
# 3: the manifest carries the checksum of the index's files and of the dataset version they were built from.
_SAVED_FORMAT = 3

# Words that say what kind of answer a question wants but never occur in that answer's content:
# wh-words, auxiliaries and the pronouns/verbs of question phrasing, on top of bm25s' English list
# (Lucene's 33 words, which lacks "what", "who", "how", "does"...). Without them "what is the
# capital of australia" ranks "Ada Lovelace wrote what is often called ..." second on the demo corpus.
QUESTION_WORDS = (
    "what", "which", "who", "whom", "whose", "when", "where", "why", "how",
    "is", "am", "was", "were", "been", "being", "do", "does", "did", "done", "has", "have", "had",
    "can", "could", "would", "should", "shall", "may", "might", "must",
    "many", "much", "i", "me", "my", "we", "you", "your", "he", "she", "his", "her", "its", "them",
    "name", "called", "tell", "about", "from",
)


@dataclass(frozen=True)
class Analysis:
    """How text becomes BM25 terms and how they are weighted: part of a saved index's key."""

    stopwords: tuple[str, ...] = STOPWORDS_EN
    stemmer: str | None = None  # a Snowball language of PyStemmer, e.g. "english"
    k1: float = 1.5
    b: float = 0.75
    # What of a passage's own document is indexed with it (``CONTEXT_PARTS``; ``in_context``): the
    # "title + passage" of DPR-style indexes, for answers that name their subject only by a pronoun.
    context: tuple[str, ...] = ()

    def key(self) -> str:
        """A stable text form (saved with an index; another analysis never reads it)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    def describe(self) -> str:
        """What it does in a few words, for a page saying how candidates were found."""
        return ", ".join((
            "question words dropped" if set(QUESTION_WORDS) <= set(self.stopwords) else "question words kept",
            f"{self.stemmer} stemmer" if self.stemmer else "no stemmer",
            f"k1 {self.k1:g}, b {self.b:g}",
            *([f"each sentence indexed with its document's {' and '.join(CONTEXT_PARTS[part] for part in self.context)} "
              "where its document is known"]
              if self.context else []),
        ))

    @classmethod
    def from_key(cls, key: str) -> Analysis:
        fields = json.loads(key)
        return cls(**{**fields, "stopwords": tuple(fields["stopwords"]), "context": tuple(fields.get("context", ()))})


# The parts of a document ``Analysis.context`` may name, and how a page says them.
CONTEXT_PARTS = {"lead": "first sentence", "neighbours": "sentences either side"}


def in_context(passages: Sequence[tuple[str, str | None]], context: Sequence[str]) -> list[str]:
    """Each passage's text as indexed: its own text, then the ``context`` parts of its document
    (``CONTEXT_PARTS``: the document's first passage, the passages just before and after it).

    ``passages`` are ``(text, document)`` in their documents' order; passages of one document share
    its key, and a passage whose document is None (unknown) is indexed alone. Uses no labels.
    """
    unknown = set(context) - set(CONTEXT_PARTS)
    if unknown:
        raise ValueError(f"unknown context part(s) {sorted(unknown)}; known: {sorted(CONTEXT_PARTS)}")
    texts = [text for text, _ in passages]
    if not context:
        return texts
    documents: dict[str, list[int]] = {}
    for position, (_, document) in enumerate(passages):
        if document is not None:
            documents.setdefault(document, []).append(position)
    indexed = list(texts)
    for members in documents.values():
        for place, position in enumerate(members):
            around = ([members[0]] if "lead" in context else []) + (
                members[max(0, place - 1):place] + members[place + 1:place + 2] if "neighbours" in context else [])
            parts = [texts[other] for other in dict.fromkeys(around) if other != position]
            indexed[position] = " ".join([texts[position], *parts])
    return indexed


PLAIN = Analysis()
# Chosen on WikiQA and TrecQA DEV by mean recall@50 out of 100 settings (benchmarks/first_stage.py,
# docs/benchmarks.md): the stop list and the stemmer carry the gain; k1 and b move it by a question or two.
# The context was adopted on DEV by a rule fixed before TEST (benchmarks/first_stage_context.py): WikiQA DEV
# +14 questions of 126 in the top 50; it changes nothing where documents are unknown (TrecQA).
FIRST_STAGE = Analysis(stopwords=STOPWORDS_EN + QUESTION_WORDS, stemmer="english", k1=2.0, b=0.3,
                       context=("lead", "neighbours"))


@dataclass(frozen=True)
class Feedback:
    """RM3 pseudo-relevance feedback: the query's own terms (``original_weight`` of the mass, shared
    equally) plus the ``terms`` heaviest terms of the first search's top ``docs`` documents (the
    rest), each document weighted by its share of their BM25 scores and each of its terms by its
    share of the document's BM25 weight (Lavrenko and Croft's relevance model, with BM25 weights for
    the query-likelihood probabilities), searched again."""

    docs: int = 10
    terms: int = 10
    original_weight: float = 0.5

    def describe(self) -> str:
        return f"RM3 expansion: {self.terms} terms of the top {self.docs}, original query {self.original_weight:g}"


# Chosen on WikiQA and TrecQA DEV out of 27 settings by mean recall@50, adopted by a rule fixed before
# TEST (benchmarks/first_stage_feedback.py, docs/benchmarks.md): WikiQA DEV +4 questions of 126 in the top 50.
FIRST_STAGE_FEEDBACK = Feedback(docs=5, terms=10, original_weight=0.3)


@functools.cache
def _stemmer(language: str) -> Stemmer.Stemmer:
    return Stemmer.Stemmer(language)


def _tokenize(texts: Sequence[str], analysis: Analysis, *, ids: bool) -> bm25s.tokenization.Tokenized | list[list[str]]:
    stemmer = _stemmer(analysis.stemmer) if analysis.stemmer else None
    return bm25s.tokenize(
        list(texts), stopwords=list(analysis.stopwords), stemmer=stemmer, return_ids=ids, show_progress=False
    )


def _fit(texts: Sequence[str], analysis: Analysis) -> bm25s.BM25 | None:
    """A bm25s index of the texts; None when they hold no indexable token at all (bm25s fails then)."""
    tokenized = _tokenize(texts, analysis, ids=True)
    if not any(tokenized.ids):
        return None
    retriever = bm25s.BM25(k1=analysis.k1, b=analysis.b)
    retriever.index(tokenized, show_progress=False)
    return retriever


def _query_tokens(retriever: bm25s.BM25 | None, query: str, analysis: Analysis) -> list[str]:
    """The query's tokens that occur in the corpus (others cannot score)."""
    vocab = retriever.vocab_dict if retriever is not None else {}
    return [token for token in _tokenize([query], analysis, ids=False)[0] if token and token in vocab]


class BM25Index:
    """A bm25s index of (doc_id, text) pairs; results come back as (doc_id, score)."""

    def __init__(self, doc_ids: Sequence[str], retriever: bm25s.BM25 | None, analysis: Analysis = FIRST_STAGE):
        """``retriever`` is None for a corpus without any indexable token (nothing can match);
        ``analysis`` is the one it was built with (queries are analysed the same way)."""
        self.doc_ids = list(doc_ids)
        self.analysis = analysis
        self._retriever = retriever

    @classmethod
    def build(cls, docs: Sequence[tuple[str, str]], analysis: Analysis = FIRST_STAGE) -> BM25Index:
        doc_ids = [doc_id for doc_id, _ in docs]
        if len(set(doc_ids)) != len(doc_ids):
            raise ValueError("doc ids must be distinct")
        return cls(doc_ids, _fit([text for _, text in docs], analysis), analysis)

    def __len__(self) -> int:
        return len(self.doc_ids)

    def search(self, query: str, k: int = 100, feedback: Feedback | None = None) -> list[tuple[str, float]]:
        """Up to ``k`` documents sharing at least one term with the query (``feedback``: with the
        expanded query), best first, ties (also at the cut-off) by ``qa_core.ordering``'s rule:
        bm25s' own top-k orders equal scores in no set way, so every score is computed and ordered here.

        Empty, stopword-only or out-of-vocabulary queries give an empty list, never an error.
        """
        tokens = _query_tokens(self._retriever, query, self.analysis)
        if not tokens or k <= 0:
            return []
        scores = self._retriever.get_scores(tokens)
        if feedback is not None:
            scores = self._expanded_scores(tokens, scores, feedback)
        matching = np.flatnonzero(scores > 0)
        if len(matching) > k:  # only the k best and every document tied with the k-th go to the tie rule
            kth = np.partition(scores[matching], len(matching) - k)[len(matching) - k]
            matching = matching[scores[matching] >= kth]
        hits = {self.doc_ids[int(i)]: float(scores[i]) for i in matching}
        return ordering.ranked(hits)[:k]

    def _expanded_scores(self, tokens: list[str], first: np.ndarray, feedback: Feedback) -> np.ndarray:
        """Every document's score for the RM3-expanded query (``Feedback``). Read straight from
        bm25s' term-by-document weight matrix (its ``scores``: CSC arrays, one column per term):
        bm25s has no query expansion nor term weights in a query, and the documents' terms are
        only there (the texts stay in the store)."""
        top = np.sort([i for i in np.argsort(-first, kind="stable")[: feedback.docs] if first[i] > 0])
        if not len(top):
            return first
        matrix = self._retriever.scores
        data, indices, indptr = matrix["data"], matrix["indices"], matrix["indptr"]
        positions = np.flatnonzero(np.isin(indices, top))
        terms = np.searchsorted(indptr, positions, side="right") - 1
        local = np.searchsorted(top, indices[positions])
        weights = np.asarray(data[positions], dtype=np.float64)
        doc_share = first[top] / first[top].sum()
        contribution = doc_share[local] * weights / np.bincount(local, weights=weights, minlength=len(top))[local]
        vocabulary, inverse = np.unique(terms, return_inverse=True)
        relevance = np.bincount(inverse, weights=contribution)
        chosen = np.argsort(-relevance, kind="stable")[: feedback.terms]
        query = {self._retriever.vocab_dict[token]: 0.0 for token in tokens}
        for term in query:
            query[term] = feedback.original_weight / len(query)
        for index in chosen:
            term = int(vocabulary[index])
            query[term] = query.get(term, 0.0) + (1 - feedback.original_weight) * relevance[index] / relevance[chosen].sum()
        scores = np.zeros(len(first))
        for term, weight in query.items():
            start, end = indptr[term], indptr[term + 1]
            scores[indices[start:end]] += weight * data[start:end]
        return scores

    def save(self, directory: Path | str) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if self._retriever is not None:
            self._retriever.save(str(directory), show_progress=False)
        (directory / _DOC_IDS_FILE).write_text(json.dumps(self.doc_ids), encoding="utf-8")
        (directory / _ANALYSIS_FILE).write_text(self.analysis.key(), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path | str, *, mmap: bool = False) -> BM25Index:
        """The index ``save`` wrote; ``mmap``: its arrays memory-mapped (shared by the processes
        reading it, paged in as queries touch them) instead of read into memory."""
        directory = Path(directory)
        doc_ids = json.loads((directory / _DOC_IDS_FILE).read_text(encoding="utf-8"))
        analysis = Analysis.from_key((directory / _ANALYSIS_FILE).read_text(encoding="utf-8"))
        if not (directory / "params.index.json").exists():
            return cls(doc_ids, None, analysis)
        retriever = bm25s.BM25.load(str(directory), mmap=mmap, show_progress=False)
        if retriever.scores["num_docs"] != len(doc_ids):
            raise ValueError(f"{len(doc_ids)} doc ids for {retriever.scores['num_docs']} indexed documents")
        return cls(doc_ids, retriever, analysis)


class IndexRebuiltWarning(UserWarning):
    """A saved index could not be read (corrupt, incomplete or not ours) and was built again."""


class IndexNotSavedWarning(UserWarning):
    """The data folder refused the index (read-only, full): it serves this process from memory."""


# What reading a damaged or foreign saved index raises (json, numpy and bm25s' own checks).
_UNREADABLE = (OSError, ValueError, KeyError, TypeError, EOFError)


def _saved_place(folder: Path, version: str, analysis: Analysis) -> tuple[Path, dict[str, object]]:
    """Where the index of ``version`` and ``analysis`` is saved in ``folder``, and what its manifest
    names (the manifest adds the files' ``checksum``)."""
    key = {"format": _SAVED_FORMAT, "version": version, "analysis": analysis.key()}
    return folder / hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24], key


def _named(manifest: dict[str, object]) -> dict[str, object]:
    """What a manifest says the index is (its checksum aside)."""
    return {name: value for name, value in manifest.items() if name != "checksum"}


def _checksum(directory: Path, version: str) -> str:
    """SHA-256 of the dataset version an index was built from and of every file of it but its
    manifest (arrays, vocabulary, doc ids, analysis), each under its name.

    bm25s reads its arrays as they are: scores multiplied, reversed or shuffled, two vocabulary
    words swapped, doc ids shuffled or another dataset's files put in place all load and rank
    wrongly without a word, so the files are hashed when the index is saved and once more when a
    process first loads it (``saved_index``; the process keeps it, ``candidate_pools.collection_index``).
    Affordable there: hashing reads each file once (hashlib's C loop); on ``benchmarks/scale.py``'s
    synthetic collection it took 0.02-0.04 s at 100,000 sentences (12.2 MB of files; loading them
    memory-mapped 0.10 s) and 0.51-0.55 s at 1,000,000 (118.6 MB; loading 1.08 s, building 760 s),
    on the 2-core machine under a load of 15-18.
    """
    digest = hashlib.sha256(json.dumps(version).encode())
    for path in sorted(directory.iterdir()):
        if path.name != _MANIFEST_FILE and path.is_file():
            with path.open("rb") as handle:
                digest.update(f"\0{path.name}\0".encode() + hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()


def is_saved(folder: Path, version: str, analysis: Analysis = FIRST_STAGE) -> bool:
    """Whether ``folder`` holds a complete index of ``version`` and ``analysis`` (its manifest written
    last and naming them); it may still turn out unreadable or not to match its checksum, which
    ``saved_index`` handles (this is asked on every request: it reads the manifest only)."""
    target, key = _saved_place(folder, version, analysis)
    try:
        return _named(json.loads((target / _MANIFEST_FILE).read_text(encoding="utf-8"))) == key
    except (OSError, ValueError, AttributeError):
        return False


class BuildLock:
    """The one builder of a folder's index: an exclusive ``flock`` on a file in the folder, so every
    process and thread sharing the data folder sees it, and the OS drops it with a killed builder."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._handle: BinaryIO | None = None

    def acquire(self) -> bool:
        """Take the lock if nobody holds it; returns whether this holder has it now."""
        self.folder.mkdir(parents=True, exist_ok=True)
        handle = open(self.folder / _LOCK_FILE, "a+b")  # an open file of its own: flock is per open file
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._handle = handle
        return True

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing the file drops its flock
            self._handle = None

    def held_elsewhere(self) -> bool:
        """Whether another holder has the lock right now (probed by taking and dropping it)."""
        if not self.acquire():
            return True
        self.release()
        return False


def saved_index(
    folder: Path,
    version: str,
    docs: Callable[[], Sequence[tuple[str, str]]],
    analysis: Analysis = FIRST_STAGE,
    progress: Callable[[str], None] | None = None,
) -> BM25Index:
    """The index of one version of a collection, built once and shared through ``folder``.

    Saved with bm25s' own format under a name derived from ``version`` and ``analysis`` (with a
    manifest of both and of the files' checksum, ``_checksum``, checked on load) and loaded
    memory-mapped by every later process. Without one for this version and analysis, it is built
    from ``docs()`` and saved atomically; the indexes of other versions or analyses in ``folder``
    are then deleted, never read. A saved index that cannot be read, whose manifest names another
    version, or whose files do not match their checksum, is rebuilt with an ``IndexRebuiltWarning``:
    a wrong index is never served. ``progress`` hears each phase of a build ("indexing", "saving").
    """
    target, key = _saved_place(folder, version, analysis)
    if target.exists():
        try:
            saved = json.loads((target / _MANIFEST_FILE).read_text(encoding="utf-8"))
            if not isinstance(saved, dict) or _named(saved) != key:
                raise ValueError(f"it was saved for {_named(saved) if isinstance(saved, dict) else saved!r}")
            if saved.get("checksum") != _checksum(target, version):
                raise ValueError("its files are not the ones it was saved with: their checksum differs")
            return BM25Index.load(target, mmap=True)
        except _UNREADABLE as error:
            warnings.warn(f"the saved BM25 index {target} could not be used ({error}); rebuilding it",
                          IndexRebuiltWarning, stacklevel=2)
            shutil.rmtree(target, ignore_errors=True)
    report = progress or (lambda phase: None)
    collection = docs()
    report("indexing")
    index = BM25Index.build(collection, analysis)
    report("saving")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".building-", dir=folder))  # dot: never taken for an index
    except OSError as error:  # a read-only or full data folder: search with the index in memory
        warnings.warn(f"the BM25 index could not be saved in {folder} ({error}); it is kept in memory for "
                      "this process only", IndexNotSavedWarning, stacklevel=2)
        return index
    try:
        index.save(staging)
        manifest = {**key, "checksum": _checksum(staging, version)}
        (staging / _MANIFEST_FILE).write_text(json.dumps(manifest), encoding="utf-8")
        staging.rename(target)
    except OSError:  # another process saved the same index meanwhile (keep theirs), or the disk is full
        shutil.rmtree(staging, ignore_errors=True)
    for other in folder.iterdir():
        if other != target and not other.name.startswith("."):
            shutil.rmtree(other, ignore_errors=True)
    return index


def bm25_scores(query: str, texts: Sequence[str], analysis: Analysis = PLAIN) -> np.ndarray:
    """BM25 score of every text for the query, with IDF statistics from this pool alone (float64)."""
    return bm25_scores_per_query([query], texts, analysis)[0]


def bm25_scores_per_query(queries: Sequence[str], texts: Sequence[str], analysis: Analysis = PLAIN) -> list[np.ndarray]:
    """``bm25_scores`` of each query over one index of the texts (an explanation scores the question
    and each of its terms in the same pool: indexing it once per term cost three times as much)."""
    retriever = _fit(texts, analysis)
    scores = []
    for query in queries:
        tokens = _query_tokens(retriever, query, analysis)
        scores.append(retriever.get_scores(tokens).astype(np.float64) if tokens else np.zeros(len(texts)))
    return scores

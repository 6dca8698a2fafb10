"""BM25 over candidate sentences with bm25s (first-stage retrieval and the BM25 baseline ranker).

Tokenisation is ``bm25s.tokenize``: lowercase, words of two or more word characters, bm25s'
English stopword list, no stemming (no stemmer package is installed, so "born" and "birth" or
"capital" and "capitals" do not match). Scoring uses bm25s' defaults (Lucene BM25, k1=1.5, b=0.75).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import bm25s
import numpy as np

from qa_core import ordering

STOPWORDS = "en"
_DOC_IDS_FILE = "doc_ids.json"


def _tokenize(texts: Sequence[str]) -> list[list[str]]:
    return bm25s.tokenize(list(texts), stopwords=STOPWORDS, return_ids=False, show_progress=False)


def _fit(texts: Sequence[str]) -> bm25s.BM25 | None:
    """A bm25s index of the texts; None when they hold no indexable token at all (bm25s fails then)."""
    tokenized = bm25s.tokenize(list(texts), stopwords=STOPWORDS, show_progress=False)
    if not any(tokenized.ids):
        return None
    retriever = bm25s.BM25()
    retriever.index(tokenized, show_progress=False)
    return retriever


def _query_tokens(retriever: bm25s.BM25 | None, query: str) -> list[str]:
    """The query's tokens that occur in the corpus (others cannot score)."""
    vocab = retriever.vocab_dict if retriever is not None else {}
    return [token for token in _tokenize([query])[0] if token and token in vocab]


class BM25Index:
    """A bm25s index of (doc_id, text) pairs; results come back as (doc_id, score)."""

    def __init__(self, doc_ids: Sequence[str], retriever: bm25s.BM25 | None):
        """``retriever`` is None for a corpus without any indexable token (nothing can match)."""
        self.doc_ids = list(doc_ids)
        self._retriever = retriever

    @classmethod
    def build(cls, docs: Sequence[tuple[str, str]]) -> BM25Index:
        doc_ids = [doc_id for doc_id, _ in docs]
        if len(set(doc_ids)) != len(doc_ids):
            raise ValueError("doc ids must be distinct")
        return cls(doc_ids, _fit([text for _, text in docs]))

    def __len__(self) -> int:
        return len(self.doc_ids)

    def search(self, query: str, k: int = 100) -> list[tuple[str, float]]:
        """Up to ``k`` documents sharing at least one term with the query, best first, ties (also
        at the cut-off) by ``qa_core.ordering``'s rule: bm25s' own top-k orders equal scores in no
        set way, so every score is computed and ordered here.

        Empty, stopword-only or out-of-vocabulary queries give an empty list, never an error.
        """
        tokens = _query_tokens(self._retriever, query)
        if not tokens or k <= 0:
            return []
        scores = self._retriever.get_scores(tokens)
        matching = np.flatnonzero(scores > 0)
        hits = {self.doc_ids[int(i)]: float(scores[i]) for i in matching}
        return ordering.ranked(hits)[:k]

    def save(self, directory: Path | str) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if self._retriever is not None:
            self._retriever.save(str(directory), show_progress=False)
        (directory / _DOC_IDS_FILE).write_text(json.dumps(self.doc_ids), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path | str) -> BM25Index:
        directory = Path(directory)
        doc_ids = json.loads((directory / _DOC_IDS_FILE).read_text(encoding="utf-8"))
        has_index = (directory / "params.index.json").exists()
        retriever = bm25s.BM25.load(str(directory), show_progress=False) if has_index else None
        return cls(doc_ids, retriever)


def bm25_scores(query: str, texts: Sequence[str]) -> np.ndarray:
    """BM25 score of every text for the query, with IDF statistics from this pool alone (float64)."""
    retriever = _fit(texts)
    tokens = _query_tokens(retriever, query)
    if not tokens:
        return np.zeros(len(texts))
    return retriever.get_scores(tokens).astype(np.float64)

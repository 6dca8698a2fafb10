"""IDF table and the four SM-CNN word-overlap features of a (question, answer) pair."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from qa_core.text.nlp import Parsed
from qa_core.text.vectors import normalize

N_OVERLAP_FEATURES = 4
FEATURE_NAMES = ("overlap", "idf_overlap", "overlap_nonstop", "idf_overlap_nonstop")


class IdfTable:
    """Unsmoothed idf(w) = log(N / df(w)) over N documents (sets of tokens), as SM-CNN's code.

    A word in every document gets 0; a word never seen gets the largest idf of the table (it is
    at least as rare as the rarest seen word). Tokens are used as given: callers normalise.
    """

    def __init__(self, documents: int = 0, df: dict[str, int] | None = None):
        self.documents = documents
        self.df = dict(df or {})
        self._idf = {w: math.log(documents / n) for w, n in self.df.items()}
        self.max_idf = max(self._idf.values(), default=0.0)

    @classmethod
    def fit(cls, documents: Iterable[Sequence[str]]) -> IdfTable:
        df: Counter[str] = Counter()
        count = 0
        for tokens in documents:
            df.update(set(tokens))
            count += 1
        # Sorted: a set's order follows the process's string hashing, and the table is saved in
        # checkpoints, which must be the same bytes in every process (``training.reproducibility``).
        return cls(count, dict(sorted(df.items())))

    def idf(self, token: str) -> float:
        return self._idf.get(token, self.max_idf)

    def to_dict(self) -> dict[str, Any]:
        return {"documents": self.documents, "df": dict(self.df)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IdfTable:
        return cls(int(data["documents"]), {str(w): int(n) for w, n in data["df"].items()})


def is_content_word(parsed: Parsed, index: int) -> bool:
    """The one content-word rule (overlap features, WO, REL links): not a stopword, punctuation
    or whitespace."""
    return not (parsed.is_stop[index] or parsed.is_punct[index] or not parsed.tokens[index].strip())


def content_words(parsed: Parsed) -> set[str]:
    """The content words of a text as normalised types."""
    return {normalize(parsed.tokens[i]) for i in range(len(parsed.tokens)) if is_content_word(parsed, i)}


def _word_sets(parsed: Parsed) -> tuple[set[str], set[str]]:
    """(all words, content words) as normalised types; whitespace tokens are never words."""
    return {normalize(token) for token in parsed.tokens if token.strip()}, content_words(parsed)


def _overlaps(question: set[str], answer: set[str], idf: IdfTable) -> tuple[float, float]:
    if not question:
        return 0.0, 0.0
    shared = question & answer
    total_idf = sum(idf.idf(w) for w in question)
    weighted = sum(idf.idf(w) for w in shared) / total_idf if total_idf > 0 else 0.0
    return len(shared) / len(question), weighted


def overlap_features(q: Parsed, a: Parsed, idf: IdfTable) -> np.ndarray:
    """float32 [overlap, idf_overlap, overlap_nonstop, idf_overlap_nonstop], each in [0, 1].

    Over word types (normalised tokens, not lemmas) with Q the question's and A the answer's:
    overlap = |Q & A| / |Q| and idf_overlap = sum(idf(w), w in Q & A) / sum(idf(w), w in Q).
    "All words" includes punctuation; "nonstop" drops spaCy stopwords and punctuation. An empty Q
    (or one whose idf sums to 0) gives 0.
    """
    q_all, q_content = _word_sets(q)
    a_all, a_content = _word_sets(a)
    return np.array(
        [*_overlaps(q_all, a_all, idf), *_overlaps(q_content, a_content, idf)], dtype=np.float32
    )

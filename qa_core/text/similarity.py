"""Similarity features of a (question, answer) pair: the "V" feature vector of the tree-kernel
reranker (Nicosia 2018, section 6.2.3; Romeo et al. 2016's similarity features), reusable by any
model that wants a feature vector.

All features lie in [0, 1] and are computed from the spaCy annotation (``Parsed``):

- ``{jaccard,containment}_{1,2,3}``: n-gram Jaccard and containment (share of the question's
  n-grams found in the answer) over content lemmas (stopwords and punctuation removed);
- ``cosine_lemma_{1,2,3}`` / ``cosine_pos_{1,2,3}``: cosine of n-gram count vectors over all lemmas
  / all fine POS tags (punctuation and whitespace dropped);
- ``cosine_dep``: cosine of dependency triples ``dep(head lemma, lemma)`` (thesis: "poss(name, twain)");
- ``lcs`` / ``longest_substring``: longest common subsequence / contiguous run of content lemmas,
  divided by the question's content length;
- the four SM-CNN word-overlap features (``qa_core.text.features``; IDF from an ``IdfTable``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from difflib import SequenceMatcher

import numpy as np

from qa_core.text.features import FEATURE_NAMES as OVERLAP_NAMES
from qa_core.text.features import IdfTable, overlap_features
from qa_core.text.links import content_lemma
from qa_core.text.nlp import Parsed

_ORDERS = (1, 2, 3)

SIMILARITY_NAMES: tuple[str, ...] = (
    *(f"jaccard_{n}" for n in _ORDERS),
    *(f"containment_{n}" for n in _ORDERS),
    *(f"cosine_lemma_{n}" for n in _ORDERS),
    *(f"cosine_pos_{n}" for n in _ORDERS),
    "cosine_dep",
    "lcs",
    "longest_substring",
    *OVERLAP_NAMES,
)


def _ngrams(items: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(items[i : i + n]) for i in range(len(items) - n + 1))


def _cosine(x: Counter, y: Counter) -> float:
    dot = sum(count * y[key] for key, count in x.items() if key in y)
    norm = math.sqrt(sum(v * v for v in x.values()) * sum(v * v for v in y.values()))
    return dot / norm if norm > 0 else 0.0


def _jaccard(x: set, y: set) -> float:
    union = x | y
    return len(x & y) / len(union) if union else 0.0


def _containment(question: set, answer: set) -> float:
    return len(question & answer) / len(question) if question else 0.0


def lcs_length(x: Sequence[str], y: Sequence[str]) -> int:
    """Longest common subsequence. Hand-written: difflib finds common runs, not subsequences, and
    no package the project depends on offers it; the DP is a few lines (one row at a time)."""
    previous = [0] * (len(y) + 1)
    for item in x:
        current = [0]
        for j, other in enumerate(y):
            current.append(previous[j] + 1 if item == other else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def _words(parsed: Parsed) -> list[int]:
    return [i for i, token in enumerate(parsed.tokens) if token.strip() and not parsed.is_punct[i]]


def _content(parsed: Parsed) -> list[str]:
    return [lemma for i in range(len(parsed.tokens)) if (lemma := content_lemma(parsed, i)) is not None]


def _dependency_triples(parsed: Parsed) -> Counter[tuple[str, str, str]]:
    return Counter(
        (parsed.deps[i], parsed.lemmas[parsed.heads[i]].lower(), parsed.lemmas[i].lower()) for i in _words(parsed)
    )


def similarity_features(q: Parsed, a: Parsed, idf: IdfTable) -> np.ndarray:
    """float32 vector in the order of ``SIMILARITY_NAMES``."""
    q_content, a_content = _content(q), _content(a)
    q_words, a_words = _words(q), _words(a)
    q_lemmas, a_lemmas = [q.lemmas[i].lower() for i in q_words], [a.lemmas[i].lower() for i in a_words]
    q_tags, a_tags = [q.tags[i] for i in q_words], [a.tags[i] for i in a_words]
    content_sets = [(set(_ngrams(q_content, n)), set(_ngrams(a_content, n))) for n in _ORDERS]
    longest = SequenceMatcher(None, q_content, a_content, autojunk=False).find_longest_match()
    q_length = max(len(q_content), 1)
    values = [
        *(_jaccard(x, y) for x, y in content_sets),
        *(_containment(x, y) for x, y in content_sets),
        *(_cosine(_ngrams(q_lemmas, n), _ngrams(a_lemmas, n)) for n in _ORDERS),
        *(_cosine(_ngrams(q_tags, n), _ngrams(a_tags, n)) for n in _ORDERS),
        _cosine(_dependency_triples(q), _dependency_triples(a)),
        lcs_length(q_content, a_content) / q_length,
        longest.size / q_length,
    ]
    return np.concatenate([np.asarray(values, dtype=np.float32), overlap_features(q, a, idf)])

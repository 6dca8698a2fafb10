"""Character trigrams of words, as in DSSM's word hashing and MP-HCNN: "hello" -> #he hel ell llo lo#.

A text becomes the sequence of its words' trigrams in order, each trigram remembering which token it
came from, so a model over trigrams can still be explained per token.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from qa_core.text.vectors import normalize

BOUNDARY = "#"
_URL_PARTS = re.compile(r"[A-Za-z0-9]+")


def word_trigrams(word: str) -> list[str]:
    """Boundary-marked trigrams of one word ("a" -> ["#a#"]); an empty word has none."""
    if not word:
        return []
    marked = f"{BOUNDARY}{word}{BOUNDARY}"
    return [marked[i : i + 3] for i in range(len(marked) - 2)]


def text_trigrams(words: Sequence[str], cap: int | None = None) -> tuple[list[str], list[int]]:
    """(trigrams, index of the word each came from) over ``words`` in order, the first ``cap``."""
    trigrams: list[str] = []
    owners: list[int] = []
    for index, word in enumerate(words):
        for trigram in word_trigrams(word):
            trigrams.append(trigram)
            owners.append(index)
    return trigrams[:cap], owners[:cap]


def url_words(url: str | None, max_chars: int = 120, placeholder: str = "<URL>") -> list[str]:
    """The alphanumeric runs of a URL cut to ``max_chars`` characters (MP-HCNN), normalised;
    ``[placeholder]`` when there is no URL, so every candidate has a URL input."""
    if not url or not url.strip():
        return [placeholder]
    return [normalize(part) for part in _URL_PARTS.findall(url.strip()[:max_chars])] or [placeholder]

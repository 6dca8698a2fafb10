"""Lexical REL links between a question and an answer: tokens that share a content lemma.

The one implementation of the lexical REL rule (Severyn & Moschitti 2013; Nicosia 2018, ch. 6):
the baselines' explanations draw these links, and ``qa_core.structure.rel`` turns the same links
into REL- tags on the shallow trees.
"""

from __future__ import annotations

from dataclasses import dataclass

from qa_core.text.features import is_content_word
from qa_core.text.nlp import Parsed


@dataclass(frozen=True)
class Link:
    """A link between a question token span and an answer token span ([start, end) token indices)."""

    q_start: int
    q_end: int
    a_start: int
    a_end: int
    kind: str  # "REL" for a shared lemma, "REL-FOCUS-<CLASS>" for focus-to-entity links
    label: str = ""  # e.g. the shared lemma, or the entity type


def content_lemma(parsed: Parsed, index: int) -> str | None:
    """Lowercase lemma of a token that may be linked; None for stopwords, punctuation, whitespace."""
    return parsed.lemmas[index].lower() if is_content_word(parsed, index) else None


def lexical_links(q: Parsed, a: Parsed) -> list[Link]:
    """One single-token ``REL`` link per (question token, answer token) pair with the same content
    lemma, ordered by question token, then answer token."""
    answer_positions: dict[str, list[int]] = {}
    for a_index in range(len(a.tokens)):
        lemma = content_lemma(a, a_index)
        if lemma is not None:
            answer_positions.setdefault(lemma, []).append(a_index)
    links: list[Link] = []
    for q_index in range(len(q.tokens)):
        lemma = content_lemma(q, q_index)
        for a_index in answer_positions.get(lemma, []) if lemma is not None else []:
            links.append(Link(q_index, q_index + 1, a_index, a_index + 1, "REL", lemma))
    return links

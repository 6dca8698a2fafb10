"""Lexical REL links between a question and an answer: tokens that share a content lemma.

The one implementation of the lexical REL rule (Severyn & Moschitti 2013; Nicosia 2018, ch. 6):
the baselines' explanations draw these links, and ``qa_core.structure.rel`` turns the same links
into REL- tags on the shallow trees.
"""

from __future__ import annotations

from qa_core.rankers.base import Link
from qa_core.text.nlp import Parsed


def content_lemma(parsed: Parsed, index: int) -> str | None:
    """Lowercase lemma of a token that may be linked; None for stopwords, punctuation, whitespace."""
    if parsed.is_stop[index] or parsed.is_punct[index] or not parsed.tokens[index].strip():
        return None
    return parsed.lemmas[index].lower()


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
